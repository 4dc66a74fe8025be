//! The three patch types and their concurrency rules (resourceVersion and UID in a patch).

use serde_json::{Value, json};

use crate::common::{Cluster, rv, unique};

const SMP: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

fn condition_types(node: &Value) -> Vec<String> {
    node["status"]["conditions"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|x| x["type"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn strategic_merge_patch_merges_node_conditions_by_type_in_set_element_order() {
    let cluster = Cluster::start().await;
    let name = unique("smp");
    cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}/status");
    let first = json!({"status": {"conditions": [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}]}});
    assert_eq!(cluster.patch(&path, SMP, &first).await.status, 200);
    let second = json!({"status": {
        "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "DiskPressure"}, {"type": "Ready"}],
        "conditions": [{"type": "DiskPressure", "status": "False"}, {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
        "addresses": [{"type": "InternalIP", "$patch": "delete"}]}});
    let reply = cluster.patch(&path, SMP, &second).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        condition_types(&reply.body),
        ["MemoryPressure", "DiskPressure", "Ready"]
    );
    let ready = &reply.body["status"]["conditions"][2];
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("KubeletNotReady"))
    );
    assert_eq!(
        ready["message"], "kubelet is posting ready status",
        "unpatched fields of a merged item survive"
    );
    assert_eq!(
        reply.body["status"]["addresses"],
        json!([{"type": "Hostname", "address": name}])
    );
}

#[tokio::test]
async fn strategic_merge_patch_null_deletes_and_patch_replace_replaces() {
    let cluster = Cluster::start().await;
    let name = unique("smpnull");
    cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    cluster
        .patch(
            &path,
            SMP,
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
        )
        .await;
    let reply = cluster
        .patch(&path, SMP, &json!({"metadata": {"labels": {"a": null}}}))
        .await;
    assert_eq!(reply.body["metadata"]["labels"], json!({"b": "2"}));
    let reply = cluster
        .patch(
            &path,
            SMP,
            &json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
        )
        .await;
    assert_eq!(reply.body["metadata"]["labels"], json!({"c": "3"}));
}

#[tokio::test]
async fn merge_patch_with_stale_resource_version_is_409_conflict() {
    let cluster = Cluster::start().await;
    let name = unique("mergerv");
    let node = cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    assert_eq!(
        cluster
            .patch(&path, MERGE, &json!({"metadata": {"labels": {"x": "1"}}}))
            .await
            .status,
        200
    );
    let stale = json!({"metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "labels": {"x": "2"}}});
    let reply = cluster.patch(&path, MERGE, &stale).await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let current = cluster.get(&path).await;
    assert_eq!(
        current.body["metadata"]["labels"]["x"], "1",
        "a rejected patch changes nothing"
    );
}

#[tokio::test]
async fn patch_with_a_different_uid_is_422_field_is_immutable() {
    let cluster = Cluster::start().await;
    let name = unique("patchuid");
    cluster.create_node(&name).await;
    let bogus = "11111111-1111-1111-1111-111111111111";
    let reply = cluster
        .patch(
            &format!("/api/v1/nodes/{name}/status"),
            SMP,
            &json!({"metadata": {"uid": bogus}}),
        )
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (422, Some("Invalid"))
    );
    assert_eq!(reply.body["details"]["causes"][0]["field"], "metadata.uid");
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("field is immutable")),
        "{}",
        reply.body["message"]
    );
}

#[tokio::test]
async fn json_patch_applies_operations_and_a_failed_test_changes_nothing() {
    let cluster = Cluster::start().await;
    let name = unique("jsonpatch");
    let node = cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    let ops = json!([{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}, {"op": "add", "path": "/spec/unschedulable", "value": true}]);
    let reply = cluster.patch(&path, JSON_PATCH, &ops).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        (
            reply.body["metadata"]["labels"]["k"].as_str(),
            reply.body["spec"]["unschedulable"].as_bool()
        ),
        (Some("v"), Some(true))
    );
    let failing = json!([{"op": "test", "path": "/metadata/labels/k", "value": "other"}, {"op": "remove", "path": "/metadata/labels"}]);
    let reply = cluster.patch(&path, JSON_PATCH, &failing).await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server rejected our request due to an error in our request",
            "reason": "Invalid", "details": {}, "code": 422}),
        "kube-apiserver's answer to any JSON patch that does not apply"
    );
    assert!(rv(&cluster.get(&path).await.body) > rv(&node));
    assert_eq!(
        cluster.get(&path).await.body["metadata"]["labels"]["k"],
        "v"
    );
}

#[tokio::test]
async fn noop_patch_keeps_the_resource_version() {
    // A Lease outside kube-node-lease: unlike a Node, nothing else writes it between the patches.
    let cluster = Cluster::start().await;
    let name = unique("noop");
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let created = cluster
        .post(leases, &json!({"metadata": {"name": name}}))
        .await;
    assert_eq!(created.status, 201);
    let path = format!("{leases}/{name}");
    let first = cluster
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"labels": {"same": "v"}}}),
        )
        .await;
    let second = cluster
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"labels": {"same": "v"}}}),
        )
        .await;
    assert_eq!(rv(&first.body), rv(&second.body));
}

#[tokio::test]
async fn unknown_patch_content_type_is_415() {
    let cluster = Cluster::start().await;
    let name = unique("ctype");
    cluster.create_node(&name).await;
    let reply = cluster
        .patch(
            &format!("/api/v1/nodes/{name}"),
            "application/xml",
            &json!({}),
        )
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
}

#[tokio::test]
async fn json_patch_bodies_that_are_not_a_list_are_400_and_bad_operations_422() {
    let cluster = Cluster::start().await;
    let name = unique("jsonbad");
    cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    let reply = cluster
        .patch(&path, JSON_PATCH, &json!({"op": "add"}))
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (400, Some("BadRequest"))
    );
    for bad in [
        json!([{"op": "frobnicate", "path": "/metadata/labels"}]),
        json!([{"op": "add", "value": 1}]),
        json!([{"op": "remove", "path": "/metadata/labels/absent"}]),
        json!([{"op": "move", "path": "/metadata/labels"}]),
    ] {
        let reply = cluster.patch(&path, JSON_PATCH, &bad).await;
        assert_eq!(
            (reply.status, reply.body["reason"].as_str()),
            (422, Some("Invalid")),
            "{bad}"
        );
    }
    // A merge patch is RFC 7386: null deletes, lists are replaced whole.
    let merged = cluster
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        )
        .await;
    assert_eq!(merged.status, 200);
    let merged = cluster
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"labels": {"a": null}}, "spec": {"taints": [{"key": "j", "effect": "NoSchedule"}]}}),
        )
        .await;
    assert_eq!(
        (
            merged.body["metadata"]["labels"].get("a"),
            merged.body["metadata"]["labels"]["b"].as_str(),
        ),
        (None, Some("2"))
    );
    assert!(
        merged.body["spec"]["taints"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["key"] != "k")),
        "the list was replaced: {}",
        merged.body["spec"]["taints"]
    );
}
