//! DELETE: preconditions, response bodies and graceful pod deletion.

use serde_json::{Value, json};

use crate::common::{Cluster, unique};

async fn create_pod(cluster: &Cluster, name: &str, node: Option<&str>) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox:1"}]});
    if let Some(node) = node {
        spec["nodeName"] = node.into();
    }
    let reply = cluster
        .post(
            "/api/v1/namespaces/default/pods",
            &json!({"metadata": {"name": name}, "spec": spec}),
        )
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    reply.body
}

#[tokio::test]
async fn delete_with_a_mismatching_uid_precondition_is_409_naming_both_uids() {
    let cluster = Cluster::start().await;
    let name = unique("precond");
    let node = cluster.create_node(&name).await;
    let wrong = "22222222-2222-2222-2222-222222222222";
    let reply = cluster
        .delete(
            &format!("/api/v1/nodes/{name}"),
            Some(&json!({"preconditions": {"uid": wrong}})),
        )
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let uid = node["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        reply.body["message"],
        format!(
            "Operation cannot be fulfilled on Node \"{name}\": the UID in the precondition ({wrong}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(
        cluster.get(&format!("/api/v1/nodes/{name}")).await.status,
        200,
        "the node survives"
    );
}

#[tokio::test]
async fn delete_with_a_stale_resource_version_precondition_is_409() {
    let cluster = Cluster::start().await;
    let name = unique("rvpre");
    let node = cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    cluster
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"v": "2"}}}),
        )
        .await;
    let reply = cluster
        .delete(
            &path,
            Some(
                &json!({"preconditions": {"resourceVersion": node["metadata"]["resourceVersion"]}}),
            ),
        )
        .await;
    assert_eq!(reply.status, 409);
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("the ResourceVersion in the precondition"))
    );
}

#[tokio::test]
async fn deleting_a_node_answers_a_success_status_and_removes_it() {
    let cluster = Cluster::start().await;
    let name = unique("del");
    let node = cluster.create_node(&name).await;
    let reply = cluster
        .delete(
            &format!("/api/v1/nodes/{name}"),
            Some(&json!({"preconditions": {"uid": node["metadata"]["uid"]}})),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        (reply.body["kind"].as_str(), reply.body["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert_eq!(reply.body["details"]["uid"], node["metadata"]["uid"]);
    assert_eq!(
        cluster.get(&format!("/api/v1/nodes/{name}")).await.status,
        404
    );
}

#[tokio::test]
async fn scheduled_pods_are_deleted_gracefully_until_a_zero_grace_delete() {
    let cluster = Cluster::start().await;
    let name = unique("graceful");
    let pod = create_pod(&cluster, &name, Some(&unique("node"))).await;
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    let reply = cluster
        .delete(&path, Some(&json!({"gracePeriodSeconds": 20})))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["metadata"]["deletionGracePeriodSeconds"], 20);
    assert!(reply.body["metadata"]["deletionTimestamp"].is_string());
    let still_there = cluster.get(&path).await;
    assert_eq!(still_there.status, 200, "a graceful delete keeps the pod");
    let final_delete = cluster
        .delete(
            &path,
            Some(
                &json!({"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}}),
            ),
        )
        .await;
    assert_eq!(final_delete.status, 200);
    assert_eq!(
        final_delete.body["kind"], "Pod",
        "pods return the deleted object"
    );
    crate::common::eventually(
        "pod removed",
        std::time::Duration::from_secs(10),
        || async { (cluster.get(&path).await.status == 404).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn unscheduled_pods_are_deleted_at_once() {
    let cluster = Cluster::start().await;
    let name = unique("unsched");
    create_pod(&cluster, &name, None).await;
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    assert_eq!(cluster.delete(&path, None).await.status, 200);
    assert_eq!(cluster.get(&path).await.status, 404);
}
