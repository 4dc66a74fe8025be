//! The status subresource rules of Nodes and Pods, and the admission taint on new Nodes.

use serde_json::json;

use crate::common::{Cluster, unique};

const SMP: &str = "application/strategic-merge-patch+json";

#[tokio::test]
async fn new_nodes_get_the_not_ready_no_schedule_taint() {
    let cluster = Cluster::start().await;
    let node = cluster.create_node(&unique("taint")).await;
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/not-ready" && t["effect"] == "NoSchedule"),
        "taints: {taints:?}"
    );
}

#[tokio::test]
async fn writes_to_the_main_resource_never_change_status() {
    let cluster = Cluster::start().await;
    let name = unique("main");
    cluster.create_node(&name).await;
    let reply = cluster
        .patch(
            &format!("/api/v1/nodes/{name}"),
            SMP,
            &json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["metadata"]["labels"]["a"], "b");
    assert!(
        reply.body["status"].get("phase").is_none(),
        "status was changed through the main resource: {}",
        reply.body["status"]
    );
}

#[tokio::test]
async fn writes_to_status_change_only_status() {
    let cluster = Cluster::start().await;
    let name = unique("status");
    cluster.create_node(&name).await;
    let reply = cluster
        .patch(
            &format!("/api/v1/nodes/{name}/status"),
            SMP,
            &json!({"spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body["status"]["conditions"][0]["reason"],
        "KubeletReady"
    );
    assert!(
        reply.body["spec"].get("unschedulable").is_none(),
        "spec changed through /status"
    );
}

#[tokio::test]
async fn pod_status_put_keeps_spec_and_pods_start_pending() {
    let cluster = Cluster::start().await;
    let name = unique("pod");
    let created = cluster
        .post("/api/v1/namespaces/default/pods", &json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}, "status": {"phase": "Running"}}))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["status"]["phase"], "Pending");
    assert_eq!(created.body["metadata"]["generation"], 1);
    let mut body = created.body.clone();
    body["spec"]["activeDeadlineSeconds"] = 5.into();
    body["status"]["phase"] = "Running".into();
    let reply = cluster
        .put(
            &format!("/api/v1/namespaces/default/pods/{name}/status"),
            &body,
        )
        .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["status"]["phase"], "Running");
    assert!(reply.body["spec"].get("activeDeadlineSeconds").is_none());
    assert_eq!(
        reply.body["metadata"]["generation"], 1,
        "status writes do not bump generation"
    );
}
