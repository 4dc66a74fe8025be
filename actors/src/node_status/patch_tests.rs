//! Exact patch bodies for the cases the kubelet's own patches show.

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::{change::status_changed, patch::status_patch};

fn node(value: serde_json::Value) -> Node {
    serde_json::from_value(value).expect("a node")
}

fn conditions(heartbeat: &str, ready: &str) -> serde_json::Value {
    json!([
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": ready, "reason": "KubeletReady", "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ])
}

#[test]
fn a_heartbeat_only_patch_carries_the_order_and_the_heartbeat_times() {
    let before = node(
        json!({"metadata": {"name": "n"}, "status": {"conditions": conditions("2026-01-01T00:00:00Z", "True")}}),
    );
    let after = node(
        json!({"metadata": {"name": "n"}, "status": {"conditions": conditions("2026-01-01T00:05:00Z", "True")}}),
    );
    assert!(
        !status_changed(
            before.status.as_ref(),
            after.status.as_ref().expect("status")
        ),
        "heartbeats alone are no change"
    );
    let patch = status_patch(&before, &after).expect("a patch");
    assert_eq!(
        patch,
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
            "conditions": [
                {"type": "MemoryPressure", "lastHeartbeatTime": "2026-01-01T00:05:00Z"},
                {"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:05:00Z"}
            ]
        }})
    );
    let bytes = serde_json::to_vec(&patch).expect("json").len();
    assert!(
        bytes <= 411,
        "a heartbeat patch of {bytes} bytes is bigger than the kubelet's 411"
    );
}

#[test]
fn a_condition_change_sends_only_the_changed_fields() {
    let before =
        node(json!({"status": {"conditions": conditions("2026-01-01T00:00:00Z", "True")}}));
    let mut after = before.clone();
    let ready = &mut after
        .status
        .as_mut()
        .and_then(|status| status.conditions.as_mut())
        .expect("conditions")[1];
    ready.status = "False".into();
    ready.reason = Some("KubeletNotReady".into());
    assert!(status_changed(
        before.status.as_ref(),
        after.status.as_ref().expect("status")
    ));
    assert_eq!(
        status_patch(&before, &after),
        Some(json!({"status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        }}))
    );
}

#[test]
fn changed_addresses_are_replaced_whole_and_removed_keys_are_nulled() {
    let before = node(json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}],
        "capacity": {"cpu": "2", "example.com/gpu": "1"}
    }}));
    let after = node(json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n"}],
        "capacity": {"cpu": "2"}
    }}));
    assert_eq!(
        status_patch(&before, &after),
        Some(json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n"}, {"$patch": "replace"}],
            "capacity": {"example.com/gpu": null}
        }}))
    );
}

#[test]
fn nothing_to_send_is_no_patch_and_quantities_compare_by_value() {
    let before = node(
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"unschedulable": false}, "status": {"capacity": {"memory": "1Gi"}}}),
    );
    let mut after = node(
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"unschedulable": true}, "status": {"capacity": {"memory": "1Gi"}}}),
    );
    assert_eq!(status_patch(&before, &after), None, "spec never travels");
    after
        .status
        .as_mut()
        .and_then(|status| status.capacity.as_mut())
        .expect("capacity")
        .insert(
            "memory".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1024Mi".into()),
        );
    assert!(!status_changed(
        before.status.as_ref(),
        after.status.as_ref().expect("status")
    ));
}

#[test]
fn label_changes_travel_in_the_status_patch() {
    let before = node(json!({"metadata": {"labels": {"kubernetes.io/os": "windows"}}}));
    let after = node(
        json!({"metadata": {"labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}),
    );
    assert_eq!(
        status_patch(&before, &after),
        Some(
            json!({"metadata": {"labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}})
        )
    );
}

#[test]
fn a_real_heartbeat_only_patch_is_no_bigger_than_the_kubelets() {
    use tokio::time::Instant;

    use jiff::Timestamp;

    use crate::{
        eviction::ThresholdValue,
        messages::RuntimeHealth,
        node_status::setters::{StatusInputs, StatusSettings, run_setters},
        ports::MachineInfo,
    };

    let machine = MachineInfo {
        hostname: "ip-10-0-113-214.eu-west-1.compute.internal".into(),
        cpu_cores: 4,
        memory_bytes: 16 << 30,
        boot_id: "b4b42049-2765-4039-8999-d201942bc082".into(),
        ephemeral_storage_bytes: Some(100 << 30),
        default_route_address: Some("10.0.113.214".parse().expect("ip")),
        ..MachineInfo::default()
    };
    let settings = StatusSettings {
        max_pods: 110,
        pods_per_core: 0,
        reserved: Default::default(),
        hard_eviction_memory: Some(ThresholdValue::Quantity(100 << 20)),
        hard_eviction_nodefs: Some(ThresholdValue::Percentage(10.0)),
        node_ips: Vec::new(),
        port: 10250,
        agent_version: "v0.1.0".into(),
        runtime_down_after: std::time::Duration::from_secs(30),
    };
    let runtime = RuntimeHealth {
        last_successful_probe: Some(Instant::now()),
        runtime_error: None,
        network_error: None,
        runtime_version: Some("containerd://1.7.13".into()),
        observed_at: Timestamp::UNIX_EPOCH,
        simulated: false,
        images: Vec::new(),
        capabilities: Default::default(),
    };
    let inputs = StatusInputs {
        volumes_in_use: None,
        node_name: "ip-10-0-113-214.eu-west-1.compute.internal",
        machine: &machine,
        settings: &settings,
        runtime: Some(&runtime),
        pressure: None,
        previous_boot_id: None,
        now_instant: Instant::now(),
        health: &[],
    };
    let mut before = Node::default();
    run_setters(
        &inputs,
        Timestamp::from_second(1_800_000_000).expect("time"),
        &mut before,
    );
    let mut after = before.clone();
    run_setters(
        &inputs,
        Timestamp::from_second(1_800_000_300).expect("time"),
        &mut after,
    );
    assert!(!status_changed(
        before.status.as_ref(),
        after.status.as_ref().expect("status")
    ));
    let body = serde_json::to_vec(&status_patch(&before, &after).expect("heartbeats differ"))
        .expect("json");
    eprintln!(
        "heartbeat-only status patch: {} bytes: {}",
        body.len(),
        String::from_utf8_lossy(&body)
    );
    // The kubelet 1.36 sends 411 B for the same heartbeat-only PATCH.
    assert!(body.len() <= 411, "{} bytes", body.len());
}
