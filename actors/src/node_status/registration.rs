//! Registration: the Node nodepulse creates, and how an existing Node of the same name is
//! adopted (the kubelet's reconcile steps: the attach/detach annotation, the default labels,
//! capacity and allocatable when absent; custom labels, taints and spec are left alone).

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::core::v1::{Node, NodeSpec, Taint},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::setters::platform;

pub const ATTACH_DETACH_ANNOTATION: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// The labels the kubelet reconciles on an existing Node (only those the new Node carries).
const RECONCILED_LABELS: [&str; 12] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "node.kubernetes.io/windows-build",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// What registration is configured with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RegistrationSettings {
    pub node_labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub provider_id: Option<String>,
    pub controller_attach_detach: bool,
}

/// The waits between registration attempts: 100 ms doubling, pinned at 7 s, forever.
pub fn registration_backoff(failures: u32) -> Duration {
    crate::retry::doubling_backoff(Duration::from_millis(100), Duration::from_secs(7), failures)
}

/// The Node to POST, before the status setters run on it. Its `kubernetes.io/hostname` label is
/// the node name: the kubelet labels its hostname, which `--hostname-override` (nodepulse's
/// `nodeName`) sets together with the name.
pub fn initial_node(name: &str, settings: &RegistrationSettings) -> Node {
    let (os, arch) = platform();
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", os),
        ("kubernetes.io/arch", arch),
        ("beta.kubernetes.io/os", os),
        ("beta.kubernetes.io/arch", arch),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    for (key, value) in &settings.node_labels {
        if labels.insert(key.clone(), value.clone()).is_some() {
            tracing::info!(label = %key, "nodeLabels overrides a default label");
        }
    }
    let annotations = settings
        .controller_attach_detach
        .then(|| [(ATTACH_DETACH_ANNOTATION.to_owned(), "true".to_owned())].into());
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            annotations,
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!settings.taints.is_empty()).then(|| settings.taints.clone()),
            provider_id: settings.provider_id.clone(),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// `existing` adopted: the candidate's reconciled fields applied to a copy. The flag says
/// whether anything changed (and so a PATCH is needed).
pub fn reconcile(existing: &Node, candidate: &Node) -> (Node, bool) {
    let mut adopted = existing.clone();
    let mut changed = false;
    let wanted = candidate
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ATTACH_DETACH_ANNOTATION));
    let annotations = adopted
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    if annotations.get(ATTACH_DETACH_ANNOTATION) != wanted {
        match wanted {
            Some(value) => annotations.insert(ATTACH_DETACH_ANNOTATION.to_owned(), value.clone()),
            None => annotations.remove(ATTACH_DETACH_ANNOTATION),
        };
        changed = true;
    }
    let candidate_labels = candidate.metadata.labels.clone().unwrap_or_default();
    let labels = adopted.metadata.labels.get_or_insert_with(BTreeMap::new);
    for key in RECONCILED_LABELS {
        let Some(value) = candidate_labels.get(key) else {
            continue;
        };
        if labels.get(key) != Some(value) {
            if value.is_empty() {
                labels.remove(key);
            } else {
                labels.insert(key.to_owned(), value.clone());
            }
            changed = true;
        }
    }
    let candidate_status = candidate.status.clone().unwrap_or_default();
    let status = adopted.status.get_or_insert_with(Default::default);
    if status.capacity.is_none() && candidate_status.capacity.is_some() {
        status.capacity = candidate_status.capacity;
        changed = true;
    }
    if status.allocatable.is_none() && candidate_status.allocatable.is_some() {
        status.allocatable = candidate_status.allocatable;
        changed = true;
    }
    (adopted, changed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn backoff_doubles_from_100ms_and_pins_at_7s() {
        let waits: Vec<u128> = (0..9)
            .map(|n| registration_backoff(n).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    }

    #[test]
    fn the_initial_node_has_default_labels_configured_labels_taints_and_provider() {
        let settings = RegistrationSettings {
            node_labels: [
                ("kubernetes.io/hostname".to_owned(), "custom".to_owned()),
                ("team".to_owned(), "infra".to_owned()),
            ]
            .into(),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("infra".into()),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }],
            provider_id: Some("aws:///eu-west-1a/i-1".into()),
            controller_attach_detach: true,
        };
        let node = serde_json::to_value(initial_node("worker-1", &settings)).expect("json");
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"], "custom",
            "nodeLabels override defaults"
        );
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(node["metadata"]["labels"]["beta.kubernetes.io/os"], "linux");
        assert_eq!(node["metadata"]["labels"]["team"], "infra");
        assert_eq!(
            node["metadata"]["annotations"][ATTACH_DETACH_ANNOTATION],
            "true"
        );
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}])
        );
        assert_eq!(node["spec"]["providerID"], "aws:///eu-west-1a/i-1");
    }

    #[test]
    fn the_hostname_label_is_the_node_name() {
        let node = initial_node("np-node", &RegistrationSettings::default());
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("kubernetes.io/hostname").map(String::as_str),
            Some("np-node")
        );
    }

    #[test]
    fn adoption_fixes_default_labels_and_annotation_but_not_custom_labels() {
        let existing: Node = serde_json::from_value(json!({"metadata": {"name": "worker-1", "labels": {"kubernetes.io/os": "windows", "team": "old"}, "annotations": {}},
            "status": {"capacity": {"cpu": "4"}}})).expect("node");
        let settings = RegistrationSettings {
            node_labels: [("team".to_owned(), "new".to_owned())].into(),
            controller_attach_detach: true,
            ..RegistrationSettings::default()
        };
        let mut candidate = initial_node("worker-1", &settings);
        candidate.status =
            serde_json::from_value(json!({"capacity": {"cpu": "2"}, "allocatable": {"cpu": "2"}}))
                .expect("status");
        let (adopted, changed) = reconcile(&existing, &candidate);
        assert!(changed);
        let adopted = serde_json::to_value(adopted).expect("json");
        assert_eq!(adopted["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(
            adopted["metadata"]["labels"]["team"], "old",
            "custom labels are not reconciled"
        );
        assert_eq!(
            adopted["metadata"]["annotations"][ATTACH_DETACH_ANNOTATION],
            "true"
        );
        assert_eq!(
            adopted["status"]["capacity"]["cpu"], "4",
            "existing capacity is kept"
        );
        assert_eq!(
            adopted["status"]["allocatable"]["cpu"], "2",
            "absent allocatable is copied"
        );
        let (_, again) = reconcile(&serde_json::from_value(adopted).expect("node"), &candidate);
        assert!(!again, "a reconciled node needs nothing more");
    }
}
