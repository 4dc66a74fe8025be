//! One rule for every field of a pod's spec: each field of `PodSpec`, `Container`,
//! `EphemeralContainer`, `SecurityContext`, `PodSecurityContext` and `Volume` is read by
//! nodepulse (the table says where), has no effect on a node (it says why), or refuses the
//! pod at admission when set (`PodFeatureUnsupported`, with every such field named). A field
//! a k8s-openapi upgrade adds fails `pod_fields_tests` until it is given a rule here.

use serde_json::Value;

use super::admission::Rejection;
use k8s_openapi::api::core::v1::Pod;

/// What nodepulse does with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRule {
    /// nodepulse reads it: where.
    Read(&'static str),
    /// Nothing on a node depends on it (the scheduler's or the API server's field, or one the
    /// kubelet on Linux ignores too): why.
    NoEffect(&'static str),
    /// nodepulse cannot honour it: a pod that sets it to anything but `allowed` (when given)
    /// is refused; `why` says what is missing.
    Refused {
        why: &'static str,
        allowed: Option<bool>,
    },
}

use FieldRule::{NoEffect, Read, Refused};

const fn refused(why: &'static str) -> FieldRule {
    Refused { why, allowed: None }
}

const SCHEDULER: FieldRule = NoEffect("the scheduler's; the kubelet does not read it either");

/// `PodSpec`.
pub const POD_SPEC: &[(&str, FieldRule)] = &[
    ("activeDeadlineSeconds", Read("cri provider::deadline")),
    (
        "affinity",
        Read("pods::node_affinity (required node affinity at admission)"),
    ),
    (
        "automountServiceAccountToken",
        NoEffect("the API server's ServiceAccount admission adds the token volume, or not"),
    ),
    ("containers", Read("cri provider (each Container's rules)")),
    ("dnsConfig", Read("cri provider::sandbox::dns_config")),
    ("dnsPolicy", Read("cri provider::sandbox::dns_config")),
    ("enableServiceLinks", Read("pods::service_env")),
    (
        "ephemeralContainers",
        Read("cri provider (each EphemeralContainer's rules)"),
    ),
    ("hostAliases", Read("cri provider::etc_hosts")),
    ("hostIPC", Read("cri provider::sandbox (namespace options)")),
    (
        "hostNetwork",
        Read("cri provider::sandbox (namespace options)"),
    ),
    ("hostPID", Read("cri provider::sandbox (namespace options)")),
    (
        "hostUsers",
        Read("cri provider::user_namespaces (the runtime handler's word, then an ID block)"),
    ),
    ("hostname", Read("cri provider::etc_hosts::host_and_domain")),
    (
        "hostnameOverride",
        Read("cri provider::etc_hosts::host_and_domain"),
    ),
    (
        "imagePullSecrets",
        Read("cri provider::objects (pull credentials)"),
    ),
    (
        "initContainers",
        Read("cri provider (each Container's rules)"),
    ),
    ("nodeName", Read("pods::admission (NodeName)")),
    ("nodeSelector", Read("pods::node_affinity")),
    ("os", Read("pods::admission (PodOSNotSupported)")),
    ("overhead", Read("pods::pod_requests")),
    ("preemptionPolicy", SCHEDULER),
    ("priority", Read("eviction::ranking")),
    (
        "priorityClassName",
        Read("eviction::ranking (critical pods)"),
    ),
    ("readinessGates", Read("pods::readiness_gates")),
    (
        "resourceClaims",
        refused("dynamic resource allocation (DRA)"),
    ),
    (
        "resources",
        Read("pods::pod_requests (admission), the QoS class, the downward API"),
    ),
    ("restartPolicy", Read("cri provider::plan")),
    (
        "runtimeClassName",
        Read("cri provider::worker (the sandbox's runtime handler)"),
    ),
    ("schedulerName", SCHEDULER),
    ("schedulingGates", SCHEDULER),
    ("schedulingGroup", SCHEDULER),
    (
        "securityContext",
        Read("cri provider (each PodSecurityContext rule)"),
    ),
    (
        "serviceAccount",
        Read("volume_manager (token volumes), as serviceAccountName"),
    ),
    (
        "serviceAccountName",
        Read("volume_manager (token volumes), pods::field_ref"),
    ),
    (
        "setHostnameAsFQDN",
        Read("cri provider::sandbox (the kernel hostname)"),
    ),
    (
        "shareProcessNamespace",
        Read("cri provider::sandbox (namespace options)"),
    ),
    (
        "subdomain",
        Read("cri provider::etc_hosts::host_and_domain"),
    ),
    (
        "terminationGracePeriodSeconds",
        Read("cri provider::grace, container annotations"),
    ),
    ("tolerations", Read("pods::admission (NoExecute taints)")),
    ("topologySpreadConstraints", SCHEDULER),
    ("volumes", Read("volume_manager (each Volume's rules)")),
];

/// `Container`; `EphemeralContainer` has these and `targetContainerName`.
pub const CONTAINER: &[(&str, FieldRule)] = &[
    ("args", Read("cri provider::container")),
    ("command", Read("cri provider::container")),
    ("env", Read("pods::env")),
    ("envFrom", Read("pods::env")),
    ("image", Read("cri provider::image")),
    ("imagePullPolicy", Read("pods::images")),
    ("lifecycle", Read("cri provider::hooks, kill")),
    ("livenessProbe", Read("prober")),
    ("name", Read("cri provider::container")),
    (
        "ports",
        Read("cri provider::sandbox (port mappings), pods::admission (host ports)"),
    ),
    ("readinessProbe", Read("prober")),
    (
        "resizePolicy",
        Read("cri provider::resize (NotRequired; a RestartContainer policy is refused)"),
    ),
    (
        "resources",
        Read("cri provider::container::linux_resources, pods::pod_requests"),
    ),
    ("restartPolicy", Read("cri provider::plan (sidecars)")),
    (
        "restartPolicyRules",
        Read("cri provider::plan (restart rules; the RestartAllContainers action is refused)"),
    ),
    (
        "securityContext",
        Read("cri provider::container::security (each SecurityContext rule)"),
    ),
    ("startupProbe", Read("prober")),
    ("stdin", Read("cri provider::container (CRI stdin)")),
    (
        "stdinOnce",
        Read("cri provider::container (CRI stdin_once)"),
    ),
    (
        "terminationMessagePath",
        Read("cri provider::termination_message"),
    ),
    (
        "terminationMessagePolicy",
        Read("cri provider::termination_message"),
    ),
    ("tty", Read("cri provider::container (CRI tty)")),
    ("volumeDevices", refused("raw block volumes")),
    (
        "volumeMounts",
        Read("cri provider::container::mounts, sub_path"),
    ),
    ("workingDir", Read("cri provider::container")),
];

pub const EPHEMERAL_ONLY: &[(&str, FieldRule)] = &[(
    "targetContainerName",
    Read("cri provider::worker (PID namespace target)"),
)];

/// `SecurityContext` (a container's).
pub const SECURITY_CONTEXT: &[(&str, FieldRule)] = &[
    (
        "allowPrivilegeEscalation",
        Read("cri provider::container::security (no_new_privs)"),
    ),
    (
        "appArmorProfile",
        Read("pods::apparmor, cri provider::isolation"),
    ),
    ("capabilities", Read("cri provider::container::security")),
    (
        "privileged",
        Read("cri provider::container::security, sandbox"),
    ),
    ("procMount", Read("cri provider::isolation::proc_paths")),
    (
        "readOnlyRootFilesystem",
        Read("cri provider::container::security"),
    ),
    ("runAsGroup", Read("cri provider::container::security")),
    ("runAsNonRoot", Read("cri provider::non_root")),
    ("runAsUser", Read("cri provider::container::security")),
    ("seLinuxOptions", Read("cri provider::isolation")),
    (
        "seccompProfile",
        Read("cri provider::isolation::seccomp_profile"),
    ),
    (
        "windowsOptions",
        NoEffect("Windows only; the kubelet on Linux ignores it"),
    ),
];

/// `PodSecurityContext`.
pub const POD_SECURITY_CONTEXT: &[(&str, FieldRule)] = &[
    (
        "appArmorProfile",
        Read("pods::apparmor, cri provider::isolation"),
    ),
    (
        "fsGroup",
        Read("volume_manager (ownership), cri provider::container::security"),
    ),
    (
        "fsGroupChangePolicy",
        NoEffect(
            "ownership is always applied recursively (`Always`); `OnRootMismatch` only skips work, with the same result",
        ),
    ),
    (
        "runAsGroup",
        Read("cri provider::container::security, sandbox"),
    ),
    ("runAsNonRoot", Read("cri provider::non_root")),
    (
        "runAsUser",
        Read("cri provider::container::security, sandbox"),
    ),
    (
        "seLinuxChangePolicy",
        NoEffect(
            "no volume is mounted with an SELinux context: the runtime relabels (`Recursive`)",
        ),
    ),
    ("seLinuxOptions", Read("cri provider::isolation")),
    (
        "seccompProfile",
        Read("cri provider::isolation::seccomp_profile"),
    ),
    (
        "supplementalGroups",
        Read("cri provider::container::security, sandbox"),
    ),
    (
        "supplementalGroupsPolicy",
        Read("pods::admission (Strict needs the Node's feature)"),
    ),
    ("sysctls", Read("pods::sysctls, cri provider::sandbox")),
    (
        "windowsOptions",
        NoEffect("Windows only; the kubelet on Linux ignores it"),
    ),
];

const IN_TREE: FieldRule = refused("this in-tree volume plugin");

/// `Volume`: its name and one source.
pub const VOLUME: &[(&str, FieldRule)] = &[
    ("awsElasticBlockStore", IN_TREE),
    ("azureDisk", IN_TREE),
    ("azureFile", IN_TREE),
    ("cephfs", IN_TREE),
    ("cinder", IN_TREE),
    ("configMap", Read("volume_manager::content")),
    ("csi", refused("inline CSI volumes")),
    ("downwardAPI", Read("volume_manager::content::downward")),
    ("emptyDir", Read("volume_manager")),
    ("ephemeral", refused("generic ephemeral volumes")),
    ("fc", IN_TREE),
    ("flexVolume", IN_TREE),
    ("flocker", IN_TREE),
    ("gcePersistentDisk", IN_TREE),
    ("gitRepo", IN_TREE),
    ("glusterfs", IN_TREE),
    ("hostPath", Read("volume_manager")),
    ("image", Read("cri provider::image_volume")),
    ("iscsi", IN_TREE),
    ("name", Read("volume_manager")),
    ("nfs", IN_TREE),
    (
        "persistentVolumeClaim",
        Read("volume_manager (claims resolved to CSI volumes)"),
    ),
    ("photonPersistentDisk", IN_TREE),
    ("portworxVolume", IN_TREE),
    ("projected", Read("volume_manager::content::projected")),
    ("quobyte", IN_TREE),
    ("rbd", IN_TREE),
    ("scaleIO", IN_TREE),
    ("secret", Read("volume_manager::content")),
    ("storageos", IN_TREE),
    ("vsphereVolume", IN_TREE),
];

/// The kubelet's reason for a pod needing what the node lacks (`lifecycle.PodFeatureUnsupported`).
pub const UNSUPPORTED_REASON: &str = "PodFeatureUnsupported";

/// Whether `value` says anything: not null, false, empty.
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        Value::String(text) => !text.is_empty(),
        _ => true,
    }
}

/// Each refused field `object` sets, as `<path>.<field> (<why>)`.
fn refused_in(object: &Value, path: &str, rules: &[(&str, FieldRule)], out: &mut Vec<String>) {
    for (field, rule) in rules {
        let Refused { why, allowed } = rule else {
            continue;
        };
        let Some(value) = object.get(*field) else {
            continue;
        };
        let set = match allowed {
            Some(allowed) => !value.is_null() && value != &Value::Bool(*allowed),
            None => is_set(value),
        };
        if !set {
            continue;
        }
        let shown = match value {
            Value::Bool(_) | Value::Number(_) | Value::String(_) => format!("={value}"),
            _ => String::new(),
        };
        out.push(format!("{path}.{field}{shown} ({why})"));
    }
}

fn each<'a>(spec: &'a Value, list: &'a str) -> impl Iterator<Item = (usize, &'a Value)> {
    spec.get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// A `restartPolicyRules` action nodepulse does not carry out: `RestartAllContainers`
/// (RestartAllContainersOnContainerExits, on in 1.36) would restart the pod's every container
/// in place; restarting only the one that exited would silently give the pod less.
fn refused_actions(container: &Value, path: &str, out: &mut Vec<String>) {
    // In-place resize is carried out without restarts; a resource that asks to restart the
    // container on resize would be resized in place instead.
    for (index, policy) in each(container, "resizePolicy") {
        if policy.get("restartPolicy").and_then(Value::as_str) == Some("RestartContainer") {
            out.push(format!(
                "{path}.resizePolicy[{index}].restartPolicy=\"RestartContainer\" \
                 (restarting a container to resize it)"
            ));
        }
    }
    for (index, rule) in each(container, "restartPolicyRules") {
        if rule.get("action").and_then(Value::as_str) == Some("RestartAllContainers") {
            out.push(format!(
                "{path}.restartPolicyRules[{index}].action=\"RestartAllContainers\" \
                 (restarting all of a pod's containers in place)"
            ));
        }
    }
}

/// Every refused field `pod` sets, by its path.
pub fn refused_fields(pod: &Pod) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref().and_then(|s| serde_json::to_value(s).ok()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    refused_in(&spec, "spec", POD_SPEC, &mut out);
    if let Some(context) = spec.get("securityContext") {
        refused_in(
            context,
            "spec.securityContext",
            POD_SECURITY_CONTEXT,
            &mut out,
        );
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (index, container) in each(&spec, list) {
            let path = format!("spec.{list}[{index}]");
            refused_in(container, &path, CONTAINER, &mut out);
            refused_actions(container, &path, &mut out);
            if let Some(context) = container.get("securityContext") {
                let path = format!("{path}.securityContext");
                refused_in(context, &path, SECURITY_CONTEXT, &mut out);
            }
        }
    }
    for (index, volume) in each(&spec, "volumes") {
        refused_in(volume, &format!("spec.volumes[{index}]"), VOLUME, &mut out);
    }
    out
}

/// The admission check: a pod that sets a refused field is refused, every such field named.
pub fn admit(pod: &Pod) -> Result<(), Rejection> {
    let refused = refused_fields(pod);
    if refused.is_empty() {
        return Ok(());
    }
    Err(Rejection::new(
        UNSUPPORTED_REASON,
        format!(
            "Pod requires features nodepulse does not provide: {}",
            refused.join(", ")
        ),
    ))
}
