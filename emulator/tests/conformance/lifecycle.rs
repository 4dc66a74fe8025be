//! The node-lifecycle controller with short periods (emulator only): silent nodes go Unknown
//! with the unreachable taints, renewing the Lease keeps a node alive, Ready again clears them.

use std::time::{Duration, SystemTime};

use nodepulse_emulator::{EmulatorConfig, LifecycleConfig};
use serde_json::{Value, json};

use crate::common::{Cluster, eventually, test_config, unique};

const SMP: &str = "application/strategic-merge-patch+json";

fn fast_lifecycle() -> EmulatorConfig {
    EmulatorConfig {
        lifecycle: LifecycleConfig {
            enabled: true,
            monitor_period: Duration::from_millis(100),
            grace_period: Duration::from_millis(1500),
            startup_grace_period: Duration::from_millis(1500),
        },
        ..test_config()
    }
}

fn now() -> String {
    nodepulse_emulator::time::format_micro_time(SystemTime::now())
}

async fn ready_node(cluster: &Cluster, name: &str) {
    cluster.create_node(name).await;
    let status = json!({"status": {"conditions": [
        {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": now(), "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": "True", "lastHeartbeatTime": now(), "reason": "KubeletReady"}]}});
    assert_eq!(
        cluster
            .patch(&format!("/api/v1/nodes/{name}/status"), SMP, &status)
            .await
            .status,
        200
    );
}

fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a Value> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn has_taint(node: &Value, key: &str, effect: &str) -> bool {
    node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == key && t["effect"] == effect))
}

#[tokio::test]
async fn silent_node_goes_unknown_with_unreachable_taints_and_recovers() {
    let Some(cluster) = Cluster::emulator_only(
        "silent_node_goes_unknown_with_unreachable_taints_and_recovers",
        fast_lifecycle(),
    )
    .await
    else {
        return;
    };
    let name = unique("silent");
    ready_node(&cluster, &name).await;
    let path = format!("/api/v1/nodes/{name}");
    eventually(
        "not-ready taint removed once Ready",
        Duration::from_secs(10),
        || async {
            let node = cluster.get(&path).await.body;
            (!has_taint(&node, "node.kubernetes.io/not-ready", "NoSchedule")).then_some(())
        },
    )
    .await;
    let node = eventually("node goes Unknown", Duration::from_secs(15), || async {
        let node = cluster.get(&path).await.body;
        (condition(&node, "Ready").and_then(|c| c["status"].as_str()) == Some("Unknown"))
            .then_some(node)
    })
    .await;
    let ready = condition(&node, "Ready").cloned().unwrap_or_default();
    assert_eq!(
        (ready["reason"].as_str(), ready["message"].as_str()),
        (
            Some("NodeStatusUnknown"),
            Some("Kubelet stopped posting node status.")
        )
    );
    assert_eq!(
        condition(&node, "MemoryPressure").map(|c| c["status"].clone()),
        Some(json!("Unknown"))
    );
    assert_eq!(
        condition(&node, "DiskPressure").map(|c| c["reason"].clone()),
        Some(json!("NodeStatusNeverUpdated"))
    );
    let tainted = eventually("unreachable taints", Duration::from_secs(10), || async {
        let node = cluster.get(&path).await.body;
        (has_taint(&node, "node.kubernetes.io/unreachable", "NoSchedule")
            && has_taint(&node, "node.kubernetes.io/unreachable", "NoExecute"))
        .then_some(node)
    })
    .await;
    assert!(!has_taint(
        &tainted,
        "node.kubernetes.io/not-ready",
        "NoExecute"
    ));
    let events = cluster
        .get("/api/v1/namespaces/default/events?fieldSelector=reason%3DNodeNotReady")
        .await;
    assert!(
        events.body["items"].as_array().is_some_and(|i| i
            .iter()
            .any(|e| e["involvedObject"]["name"] == name.as_str())),
        "NodeNotReady recorded"
    );

    let ready_again = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now(), "reason": "KubeletReady"}]}});
    assert_eq!(
        cluster
            .patch(&format!("{path}/status"), SMP, &ready_again)
            .await
            .status,
        200
    );
    eventually(
        "unreachable taints removed",
        Duration::from_secs(10),
        || async {
            let node = cluster.get(&path).await.body;
            (!has_taint(&node, "node.kubernetes.io/unreachable", "NoSchedule")
                && !has_taint(&node, "node.kubernetes.io/unreachable", "NoExecute"))
            .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn renewing_the_lease_keeps_a_node_from_going_unknown() {
    let Some(cluster) = Cluster::emulator_only(
        "renewing_the_lease_keeps_a_node_from_going_unknown",
        fast_lifecycle(),
    )
    .await
    else {
        return;
    };
    let name = unique("renewing");
    ready_node(&cluster, &name).await;
    let lease_path =
        format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}");
    let created = cluster.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", &json!({"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now()}})).await;
    assert_eq!(created.status, 201);
    // Renew for three grace periods; the node must stay Ready throughout.
    let until = tokio::time::Instant::now() + Duration::from_millis(4500);
    while tokio::time::Instant::now() < until {
        let reply = cluster
            .patch(
                &lease_path,
                "application/merge-patch+json",
                &json!({"spec": {"renewTime": now()}}),
            )
            .await;
        assert_eq!(reply.status, 200);
        let node = cluster.get(&format!("/api/v1/nodes/{name}")).await.body;
        assert_eq!(
            condition(&node, "Ready").and_then(|c| c["status"].as_str()),
            Some("True"),
            "went {node}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Stop renewing: now it must go Unknown.
    eventually(
        "node goes Unknown after renewals stop",
        Duration::from_secs(15),
        || async {
            let node = cluster.get(&format!("/api/v1/nodes/{name}")).await.body;
            (condition(&node, "Ready").and_then(|c| c["status"].as_str()) == Some("Unknown"))
                .then_some(())
        },
    )
    .await;
}

/// The writes kube-controller-manager makes to every Node, which the emulator makes in tests too
/// (health monitoring off): the taint manager drops `not-ready` once the Node is Ready, and the
/// TTL controller sets `node.alpha.kubernetes.io/ttl` ("0" below 100 Nodes).
#[tokio::test]
async fn controllers_drop_the_not_ready_taint_of_a_ready_node_and_annotate_its_ttl() {
    let cluster = Cluster::start().await;
    let name = unique("controllers");
    ready_node(&cluster, &name).await;
    let path = format!("/api/v1/nodes/{name}");
    let node = eventually(
        "not-ready taints gone and the TTL annotation set",
        Duration::from_secs(20),
        || async {
            let node = cluster.get(&path).await.body;
            let untainted = !has_taint(&node, "node.kubernetes.io/not-ready", "NoSchedule")
                && !has_taint(&node, "node.kubernetes.io/not-ready", "NoExecute");
            let annotated = node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"]
                .as_str()
                .is_some();
            (untainted && annotated).then_some(node)
        },
    )
    .await;
    let nodes = cluster.get("/api/v1/nodes").await.body["items"]
        .as_array()
        .map_or(0, Vec::len);
    let ttl = node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"].as_str();
    if nodes < 90 {
        assert_eq!(ttl, Some("0"), "a cluster of {nodes} Nodes");
    } else {
        assert!(ttl.is_some_and(|t| t.parse::<u32>().is_ok()), "{ttl:?}");
    }
    cluster.delete(&path, None).await;
}
