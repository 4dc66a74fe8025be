//! What kube-apiserver does to a new Pod before storing it: `SetDefaults_Pod`/`_PodSpec`/
//! `_Container` (pkg/apis/core/v1/defaults.go), the Priority admission plugin with no
//! PriorityClass marked default, and the strategy's `PrepareForCreate` status. Pure; a field
//! the client set is kept.

use serde_json::{Map, Value, json};

use super::strategy::object_entry;

/// The built-in PriorityClasses every cluster has, with their values (`scheduling.SystemPriorityClasses`).
const SYSTEM_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// Defaults, admission and the initial status of a Pod being created.
pub fn prepare_pod(pod: &mut Map<String, Value>) {
    object_entry(pod, "metadata").insert("generation".into(), 1.into());
    let spec = object_entry(pod, "spec");
    for (field, default) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
    ] {
        spec.entry(field).or_insert(default);
    }
    admit_priority(spec);
    admit_default_toleration_seconds(spec);
    default_volumes(spec);
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            containers
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(default_container);
        }
    }
    let qos = nodepulse_validation::qos::compute_qos_class(&Value::Object(spec.clone()));
    // PrepareForCreate resets status: clients cannot create a pod with a status.
    pod.insert(
        "status".into(),
        json!({"phase": "Pending", "qosClass": qos}),
    );
}

/// The v1 `serviceAccount` alias of `serviceAccountName` (`Convert_v1_PodSpec_To_core_PodSpec`
/// and back): a pod naming only the alias runs as it, and the alias always reads back as the
/// name (both absent when empty, Go's `omitempty`).
pub fn alias_service_account(pod: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = pod.get_mut("spec") else {
        return;
    };
    let named = |field: &str| {
        spec.get(field)
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
    };
    match named("serviceAccountName").or_else(|| named("serviceAccount")) {
        Some(name) => {
            spec.insert("serviceAccountName".into(), json!(name));
            spec.insert("serviceAccount".into(), json!(name));
        }
        None => {
            spec.remove("serviceAccountName");
            spec.remove("serviceAccount");
        }
    }
}

/// The Priority admission plugin on update: a spec without priority or preemption policy keeps
/// the ones the pod was admitted with.
pub fn keep_admitted_priority(old: &Value, new: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = new.get_mut("spec") else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        if let (None, Some(admitted)) = (spec.get(field), old.pointer(&format!("/spec/{field}"))) {
            spec.insert(field.into(), admitted.clone());
        }
    }
}

/// The priority `admitPod` computes on create: 0 without a class name (no class is marked
/// default), the system classes' values; `None` for other class names, PriorityClasses the
/// emulator does not serve (left as sent).
fn class_priority(spec: &Map<String, Value>) -> Option<i64> {
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if class.is_empty() {
        return Some(0);
    }
    SYSTEM_PRIORITY_CLASSES
        .iter()
        .find(|(name, _)| *name == class)
        .map(|(_, value)| *value)
}

/// Why the Priority admission plugin refuses a new pod (403 Forbidden): a `priority` or
/// `preemptionPolicy` of its own that differs from what its class gives.
pub fn priority_refusal(pod: &Value) -> Option<String> {
    let spec = pod.get("spec").and_then(Value::as_object)?;
    let computed = class_priority(spec)?;
    if let Some(given) = spec.get("priority").filter(|p| **p != json!(computed)) {
        return Some(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
        ));
    }
    let policy = spec.get("preemptionPolicy").and_then(Value::as_str)?;
    (policy != PREEMPT_LOWER_PRIORITY).then(|| format!("the string value of PreemptionPolicy ({policy}) must not be provided in pod spec; priority admission controller computed {PREEMPT_LOWER_PRIORITY} from the given PriorityClass name"))
}

/// `admitPod` on create: the class's priority, and `PreemptLowerPriority` (the policy of the
/// system classes and of no class at all).
fn admit_priority(spec: &mut Map<String, Value>) {
    if let Some(priority) = class_priority(spec) {
        spec.entry("priority").or_insert(json!(priority));
        spec.entry("preemptionPolicy")
            .or_insert(json!(PREEMPT_LOWER_PRIORITY));
    }
}

/// How long the DefaultTolerationSeconds plugin lets a pod stay on a not-ready or unreachable
/// Node (its `--default-not-ready-toleration-seconds` and `--default-unreachable-…` default).
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The DefaultTolerationSeconds admission plugin on create: a pod that does not already
/// tolerate the `not-ready` (or `unreachable`) NoExecute taint — by key or by an empty key, with
/// effect NoExecute or none — gets a toleration of it for 300 s. (So the kubelet's admission,
/// which refuses untolerated NoExecute taints, admits pods on a Node that is not Ready yet.)
fn admit_default_toleration_seconds(spec: &mut Map<String, Value>) {
    const KEYS: [&str; 2] = [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ];
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Value::Array(tolerations) = tolerations else {
        return;
    };
    let tolerates = |key: &str| {
        tolerations.iter().any(|toleration| {
            let field = |name: &str| toleration.get(name).and_then(Value::as_str).unwrap_or("");
            (field("key") == key || field("key").is_empty())
                && (field("effect") == "NoExecute" || field("effect").is_empty())
        })
    };
    let missing: Vec<&str> = KEYS.into_iter().filter(|key| !tolerates(key)).collect();
    for key in missing {
        tolerations.push(
            json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}),
        );
    }
}

/// `SetDefaults_Container`, and `SetDefaults_Pod`'s requests defaulted from limits.
/// `SetDefaults_EphemeralContainer`: a container's defaults.
pub fn default_ephemeral_container(container: &mut Map<String, Value>) {
    default_container(container);
}

fn default_container(container: &mut Map<String, Value>) {
    let policy = pull_policy(container.get("image"));
    container
        .entry("imagePullPolicy")
        .or_insert_with(|| json!(policy));
    container
        .entry("terminationMessagePath")
        .or_insert_with(|| json!("/dev/termination-log"));
    container
        .entry("terminationMessagePolicy")
        .or_insert_with(|| json!("File"));
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(probe)) = container.get_mut(probe) {
            default_probe(probe);
        }
    }
    if let Some(Value::Array(env)) = container.get_mut("env") {
        for var in env.iter_mut() {
            default_field_ref(var.pointer_mut("/valueFrom/fieldRef"));
        }
    }
    if let Some(Value::Array(ports)) = container.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert(json!("TCP"));
        }
    }
    let resources = object_entry(container, "resources");
    if let Some(Value::Object(limits)) = resources.get("limits").cloned() {
        let requests = object_entry(resources, "requests");
        for (name, quantity) in limits {
            requests.entry(name).or_insert(quantity);
        }
    }
}

/// `SetDefaults_Probe` and `SetDefaults_HTTPGetAction`.
fn default_probe(probe: &mut Map<String, Value>) {
    for (field, default) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        probe.entry(field).or_insert(json!(default));
    }
    if let Some(Value::Object(get)) = probe.get_mut("httpGet") {
        get.entry("path").or_insert(json!("/"));
        get.entry("scheme").or_insert(json!("HTTP"));
    }
}

/// The volume defaults: a volume without a source is an `emptyDir` (`SetDefaults_Volume`); file
/// mode 0644 (420) for secret, configMap, downwardAPI and projected volumes, an empty
/// `hostPath` type, projected tokens valid an hour, field references to `v1`, an image
/// volume's pull policy as a container's.
fn default_volumes(spec: &mut Map<String, Value>) {
    let Some(Value::Array(volumes)) = spec.get_mut("volumes") else {
        return;
    };
    for volume in volumes.iter_mut().filter_map(Value::as_object_mut) {
        if volume.keys().all(|k| k == "name") {
            volume.insert("emptyDir".into(), json!({}));
        }
        default_field_refs(volume.get_mut("downwardAPI"));
        let sources = volume
            .get_mut("projected")
            .and_then(|p| p.get_mut("sources"));
        if let Some(Value::Array(sources)) = sources {
            for source in sources.iter_mut() {
                if let Some(Value::Object(token)) = source.get_mut("serviceAccountToken") {
                    token.entry("expirationSeconds").or_insert(json!(3600));
                }
                default_field_refs(source.get_mut("downwardAPI"));
            }
        }
        for source in ["secret", "configMap", "downwardAPI", "projected"] {
            if let Some(Value::Object(source)) = volume.get_mut(source) {
                source.entry("defaultMode").or_insert(json!(420));
            }
        }
        if let Some(Value::Object(host_path)) = volume.get_mut("hostPath") {
            host_path.entry("type").or_insert(json!(""));
        }
        if let Some(Value::Object(image)) = volume.get_mut("image") {
            let policy = pull_policy(image.get("reference"));
            image.entry("pullPolicy").or_insert_with(|| json!(policy));
        }
    }
}

/// `Always` for an image whose tag is `latest` (or that has neither tag nor digest),
/// `IfNotPresent` otherwise: a container's `imagePullPolicy` and an image volume's `pullPolicy`.
fn pull_policy(image: Option<&Value>) -> &'static str {
    let image = image.and_then(Value::as_str).unwrap_or("");
    if image_tag(image) == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// `SetDefaults_ObjectFieldSelector` on a downwardAPI source's items.
fn default_field_refs(downward_api: Option<&mut Value>) {
    let items = downward_api.and_then(|d| d.get_mut("items"));
    if let Some(Value::Array(items)) = items {
        items
            .iter_mut()
            .for_each(|item| default_field_ref(item.get_mut("fieldRef")));
    }
}

fn default_field_ref(field_ref: Option<&mut Value>) {
    if let Some(Value::Object(field_ref)) = field_ref {
        field_ref.entry("apiVersion").or_insert(json!("v1"));
    }
}

/// The tag `parsers.ParseImageName` finds: the one after the last path component's `:`, else
/// `latest` when there is no digest either.
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match (last.split_once(':'), digest) {
        (Some((_, tag)), _) => Some(tag),
        (None, None) => Some("latest"),
        (None, Some(_)) => None,
    }
}

#[cfg(test)]
#[path = "pod_defaults_tests.rs"]
mod tests;
