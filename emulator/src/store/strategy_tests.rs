//! Tests of the per-kind create/update rules.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::*;
use crate::api::resource::{LEASES, NAMESPACES, NODES, PODS};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

#[test]
fn new_nodes_get_the_not_ready_no_schedule_taint_once() {
    let mut node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}});
    prepare_for_create(&NODES, &mut node, "uid-1", now());
    assert_eq!(
        node["spec"]["taints"],
        json!([{"key": "x", "effect": "NoExecute"}, {"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}])
    );
    assert_eq!(node["metadata"]["uid"], "uid-1");
    assert_eq!(
        node["metadata"]["creationTimestamp"],
        "2024-05-01T12:00:00Z"
    );
    assert_eq!(
        (node["kind"].as_str(), node["apiVersion"].as_str()),
        (Some("Node"), Some("v1"))
    );

    let mut tainted = json!({"metadata": {"name": "n2"}, "spec": {"taints": [{"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]}});
    prepare_for_create(&NODES, &mut tainted, "uid-2", now());
    assert_eq!(tainted["spec"]["taints"].as_array().map(Vec::len), Some(1));
}

#[test]
fn new_pods_start_pending_with_generation_one_and_defaults() {
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": {"phase": "Running"}});
    prepare_for_create(&PODS, &mut pod, "u", now());
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    assert_eq!(pod["metadata"]["generation"], 1);
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
}

#[test]
fn main_resource_updates_keep_status_and_status_updates_keep_spec() {
    let old = json!({"metadata": {"name": "n", "uid": "u", "creationTimestamp": "t"}, "spec": {"unschedulable": false}, "status": {"phase": "A"}});
    let mut main = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}, "status": {"phase": "B"}});
    prepare_for_update(&NODES, None, &old, &mut main);
    assert_eq!(
        (
            main["spec"]["unschedulable"].as_bool(),
            main["status"]["phase"].as_str()
        ),
        (Some(true), Some("A"))
    );
    assert_eq!(main["metadata"]["uid"], "u");

    let mut status = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}, "status": {"phase": "B"}});
    prepare_for_update(&NODES, Some("status"), &old, &mut status);
    assert_eq!(
        (
            status["spec"]["unschedulable"].as_bool(),
            status["status"]["phase"].as_str()
        ),
        (Some(false), Some("B"))
    );
}

#[test]
fn pod_generation_moves_only_with_spec_changes() {
    let spec = |image: &str| json!({"containers": [{"name": "c", "image": image}]});
    let old = json!({"metadata": {"name": "p", "generation": 1}, "spec": spec("a"), "status": {}});
    // Go's `null`s are no change: the specs are compared in their stored (typed) form.
    let mut same = json!({"metadata": {"name": "p", "labels": {"x": "y"}},
        "spec": {"containers": [{"name": "c", "image": "a", "args": null}], "nodeSelector": null}});
    prepare_for_update(&PODS, None, &old, &mut same);
    assert_eq!(same["metadata"]["generation"], 1);
    let mut changed = json!({"metadata": {"name": "p"}, "spec": spec("b")});
    prepare_for_update(&PODS, None, &old, &mut changed);
    assert_eq!(changed["metadata"]["generation"], 2);
}

#[test]
fn create_validation_reports_names_and_required_fields() {
    assert_eq!(
        validate_create(&NODES, &json!({"metadata": {}})),
        vec![FieldError::required(
            "metadata.name",
            "name or generateName is required"
        )]
    );
    let bad = validate_create(&NODES, &json!({"metadata": {"name": "Bad_Name"}}));
    assert!(
        bad[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
    );
    assert!(!validate_create(&NAMESPACES, &json!({"metadata": {"name": "a.b"}})).is_empty());
    assert_eq!(
        validate_create(&PODS, &json!({"metadata": {"name": "p"}, "spec": {}}))[0].field,
        "spec.containers"
    );
    assert!(
        !validate_create(
            &LEASES,
            &json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}})
        )
        .is_empty()
    );
}

#[test]
fn uid_is_immutable() {
    let old = json!({"metadata": {"name": "n", "uid": "a"}});
    let new = json!({"metadata": {"name": "n", "uid": "b"}});
    let errors = validate_update(&NODES, &old, &new);
    assert_eq!(
        errors,
        vec![FieldError::invalid(
            "metadata.uid",
            &json!("b"),
            "field is immutable"
        )]
    );
}

#[test]
fn a_lease_update_is_validated_like_a_create_after_the_metadata() {
    let old = json!({"metadata": {"name": "l", "uid": "a"}, "spec": {"leaseDurationSeconds": 40}});
    let new = json!({"metadata": {"name": "l", "uid": "b"}, "spec": {"leaseDurationSeconds": -1}});
    let fields: Vec<String> = validate_update(&LEASES, &old, &new)
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(fields, ["metadata.uid", "spec.leaseDurationSeconds"]);
}

#[test]
fn a_pods_qos_class_cannot_change_after_create() {
    let old = json!({"metadata": {"name": "p", "uid": "u"}, "status": {"qosClass": "Burstable"}});
    let same = json!({"metadata": {"name": "p", "uid": "u"}, "status": {"qosClass": "Burstable", "phase": "Running"}});
    assert!(validate_update(&PODS, &old, &same).is_empty());
    let changed =
        json!({"metadata": {"name": "p", "uid": "u"}, "status": {"qosClass": "BestEffort"}});
    let errors: Vec<String> = validate_update(&PODS, &old, &changed)
        .iter()
        .map(nodepulse_validation::FieldError::render)
        .collect();
    assert_eq!(
        errors,
        ["status.qosClass: Invalid value: \"BestEffort\": field is immutable"]
    );
}

#[test]
fn a_pod_with_pod_level_resources_is_burstable_from_them() {
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "containers": [{"name": "c", "image": "busybox"}]}});
    prepare_for_create(&PODS, &mut pod, "u", now());
    assert_eq!(pod["status"]["qosClass"], "Burstable");
}
