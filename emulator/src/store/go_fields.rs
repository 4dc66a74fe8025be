//! The fields Go's API types always serialise, filled in where a stored object lacks them, so
//! what clients read back has them as kube-apiserver's answers do: struct-valued fields have no
//! `omitempty` effect in Go (a Lease always has `spec: {}`, a Node `spec: {}` and a `status`
//! with `daemonEndpoints` and every `nodeInfo` string; a zero `metav1.Time` is `null`, as in a
//! Pod condition's `lastProbeTime`). Pure; the strategies call it.

use serde_json::{Map, Value, json};

use crate::api::StoredKind;

use super::strategy::object_entry;

/// `NodeSystemInfo`'s string fields, none of them `omitempty`.
const NODE_INFO: [&str; 10] = [
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
];

/// Adds what Go would serialise for `kind` and `object` lacks; never changes a present value.
pub fn fill(kind: StoredKind, object: &mut Map<String, Value>) {
    match kind {
        StoredKind::Lease => {
            object_entry(object, "spec");
        }
        StoredKind::Node => {
            object_entry(object, "spec");
            let status = object_entry(object, "status");
            let endpoint = object_entry(object_entry(status, "daemonEndpoints"), "kubeletEndpoint");
            endpoint.entry("Port").or_insert(json!(0));
            let info = object_entry(status, "nodeInfo");
            for field in NODE_INFO {
                info.entry(field).or_insert(json!(""));
            }
        }
        StoredKind::Event => fill_core_event(object),
        StoredKind::Pod => fill_pod(object),
        StoredKind::CsiNode | StoredKind::CsiDriver => {
            object_entry(object, "spec");
        }
        StoredKind::PersistentVolume
        | StoredKind::PersistentVolumeClaim
        | StoredKind::VolumeAttachment => {
            object_entry(object, "spec");
            object_entry(object, "status");
        }
        StoredKind::Service => {
            object_entry(object, "spec");
            object_entry(object, "status");
        }
        StoredKind::Namespace
        | StoredKind::ConfigMap
        | StoredKind::Secret
        | StoredKind::RuntimeClass
        | StoredKind::ServiceAccount => {}
        StoredKind::CertificateSigningRequest => {
            object_entry(object, "spec");
            object_entry(object, "status");
        }
    }
}

/// A Pod: `spec` and `status` are structs; a condition's zero times are `null`; a container
/// status always has its `state` and `lastState` structs, and a running or terminated state
/// its zero times as `null`.
fn fill_pod(pod: &mut Map<String, Value>) {
    object_entry(pod, "spec");
    let status = object_entry(pod, "status");
    if let Some(Value::Array(conditions)) = status.get_mut("conditions") {
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            for field in ["lastProbeTime", "lastTransitionTime"] {
                condition.entry(field).or_insert(Value::Null);
            }
        }
    }
    for list in [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ] {
        let Some(Value::Array(statuses)) = status.get_mut(list) else {
            continue;
        };
        for container in statuses.iter_mut().filter_map(Value::as_object_mut) {
            for state in ["state", "lastState"] {
                fill_container_state(object_entry(container, state));
            }
        }
    }
}

fn fill_container_state(state: &mut Map<String, Value>) {
    for (phase, times) in [
        ("running", &["startedAt"][..]),
        ("terminated", &["startedAt", "finishedAt"][..]),
    ] {
        if let Some(Value::Object(detail)) = state.get_mut(phase) {
            for time in times {
                detail.entry(*time).or_insert(Value::Null);
            }
        }
    }
}

/// A core `v1` Event (the stored form): `involvedObject` and `source` are structs, the three
/// timestamps zero times (`null`), `reportingComponent`/`reportingInstance` strings without
/// `omitempty`. The events.k8s.io view renames them (`events_view`).
fn fill_core_event(event: &mut Map<String, Value>) {
    object_entry(event, "involvedObject");
    object_entry(event, "source");
    for field in ["firstTimestamp", "lastTimestamp", "eventTime"] {
        event.entry(field).or_insert(Value::Null);
    }
    for field in ["reportingComponent", "reportingInstance"] {
        event.entry(field).or_insert(json!(""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(kind: StoredKind, object: Value) -> Value {
        let mut object = object;
        if let Some(map) = object.as_object_mut() {
            fill(kind, map);
        }
        object
    }

    #[test]
    fn a_bare_node_reads_back_as_go_serialises_it() {
        let node = filled(StoredKind::Node, json!({"metadata": {"name": "n"}}));
        assert_eq!(node["spec"], json!({}));
        assert_eq!(
            node["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        assert_eq!(node["status"]["nodeInfo"]["bootID"], "");
        assert_eq!(
            node["status"]["nodeInfo"].as_object().map(Map::len),
            Some(10)
        );
    }

    #[test]
    fn present_values_are_kept_and_other_kinds_untouched() {
        let node = filled(
            StoredKind::Node,
            json!({"spec": {"podCIDR": "10.0.0.0/24"}, "status": {"nodeInfo": {"bootID": "b"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}),
        );
        assert_eq!(node["spec"], json!({"podCIDR": "10.0.0.0/24"}));
        assert_eq!(node["status"]["nodeInfo"]["bootID"], "b");
        assert_eq!(
            node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
        assert_eq!(
            filled(StoredKind::Lease, json!({"metadata": {}})),
            json!({"metadata": {}, "spec": {}})
        );
        let namespace = json!({"metadata": {}});
        assert_eq!(filled(StoredKind::Namespace, namespace.clone()), namespace);
    }

    #[test]
    fn pod_conditions_and_container_states_read_back_as_go_serialises_them() {
        let pod = filled(
            StoredKind::Pod,
            json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}}),
        );
        assert_eq!(
            pod,
            json!({"spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "lastProbeTime": null}],
                "containerStatuses": [{"name": "c", "lastState": {},
                    "state": {"terminated": {"exitCode": 0, "startedAt": null, "finishedAt": null}}}]}})
        );
    }

    #[test]
    fn a_core_event_reads_back_with_null_times_and_empty_reporter() {
        let event = filled(
            StoredKind::Event,
            json!({"involvedObject": {"kind": "Node"}, "lastTimestamp": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(
            event,
            json!({"involvedObject": {"kind": "Node"}, "source": {}, "firstTimestamp": null,
                "lastTimestamp": "2026-01-01T00:00:00Z", "eventTime": null,
                "reportingComponent": "", "reportingInstance": ""})
        );
    }
}
