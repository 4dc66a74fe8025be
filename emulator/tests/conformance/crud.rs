//! Create, get and list: object metadata, the global resourceVersion and the `Status`
//! bodies of failed requests.

use serde_json::json;

use crate::common::{Cluster, rv, unique};

#[tokio::test]
async fn created_objects_get_uid_timestamp_and_increasing_resource_versions() {
    let cluster = Cluster::start().await;
    let a = cluster.create_node(&unique("crud")).await;
    let b = cluster.create_node(&unique("crud")).await;
    assert!(rv(&b) > rv(&a), "one global, increasing resourceVersion");
    assert_eq!(a["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(
        a["metadata"]["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let list = cluster.get("/api/v1/nodes").await;
    assert!(
        rv(&list.body) >= rv(&b),
        "a list is at least as new as the writes before it"
    );
}

#[tokio::test]
async fn builtin_namespaces_exist() {
    let cluster = Cluster::start().await;
    for ns in ["default", "kube-system", "kube-node-lease"] {
        let reply = cluster.get(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(
            (reply.status, reply.body["status"]["phase"].as_str()),
            (200, Some("Active")),
            "{ns}"
        );
    }
}

#[tokio::test]
async fn missing_object_is_404_not_found_status() {
    let cluster = Cluster::start().await;
    let name = unique("missing");
    let reply = cluster
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}"
        ))
        .await;
    assert_eq!(reply.status, 404);
    assert_eq!(
        reply.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("leases.coordination.k8s.io \"{name}\" not found"), "reason": "NotFound",
            "details": {"name": name, "group": "coordination.k8s.io", "kind": "leases"}, "code": 404})
    );
}

#[tokio::test]
async fn creating_an_existing_name_is_409_already_exists() {
    let cluster = Cluster::start().await;
    let name = unique("dup");
    cluster.create_node(&name).await;
    let reply = cluster
        .post("/api/v1/nodes", &json!({"metadata": {"name": name}}))
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    assert_eq!(
        reply.body["message"],
        format!("nodes \"{name}\" already exists")
    );
    assert_eq!(
        reply.body["details"],
        json!({"name": name, "kind": "nodes"})
    );
}

#[tokio::test]
async fn invalid_names_are_422_invalid_with_causes() {
    let cluster = Cluster::start().await;
    let reply = cluster
        .post("/api/v1/nodes", &json!({"metadata": {"name": "Not_Valid"}}))
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (422, Some("Invalid"))
    );
    assert_eq!(reply.body["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(
        reply.body["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    assert!(reply.body["message"].as_str().is_some_and(|m| m.starts_with("Node \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain")));
}

#[tokio::test]
async fn malformed_bodies_are_400_bad_request() {
    let cluster = Cluster::start().await;
    let reply = cluster
        .call("POST", "/api/v1/nodes", None, Some(&json!("not an object")))
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (400, Some("BadRequest"))
    );
}

#[tokio::test]
async fn namespaced_create_in_a_missing_namespace_is_404() {
    let cluster = Cluster::start().await;
    let ns = unique("nons");
    let reply = cluster
        .post(
            &format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
            &json!({"metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(reply.status, 404);
    assert_eq!(
        reply.body["message"],
        format!("namespaces \"{ns}\" not found")
    );
}

#[tokio::test]
async fn lists_paginate_with_limit_and_continue() {
    let cluster = Cluster::start().await;
    let label = unique("page");
    for _ in 0..5 {
        let name = unique("page");
        let reply = cluster
            .post(
                "/api/v1/nodes",
                &json!({"metadata": {"name": name, "labels": {"page": label}}}),
            )
            .await;
        assert_eq!(reply.status, 201);
    }
    let mut names = Vec::new();
    let mut path = format!("/api/v1/nodes?labelSelector=page%3D{label}&limit=2");
    loop {
        let page = cluster.get(&path).await;
        assert_eq!(page.status, 200);
        let items = page.body["items"].as_array().cloned().unwrap_or_default();
        assert!(items.len() <= 2);
        names.extend(
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string)),
        );
        match page.body["metadata"]["continue"]
            .as_str()
            .filter(|c| !c.is_empty())
        {
            Some(token) => {
                path =
                    format!("/api/v1/nodes?labelSelector=page%3D{label}&limit=2&continue={token}")
            }
            None => break,
        }
    }
    let mut unique_names = names.clone();
    unique_names.sort();
    unique_names.dedup();
    assert_eq!((names.len(), unique_names.len()), (5, 5));
}

/// Go serialises struct-valued fields even when empty: what a client reads back has them.
#[tokio::test]
async fn objects_read_back_carry_the_fields_go_always_serialises() {
    let cluster = Cluster::start().await;
    let name = unique("go-fields");
    cluster.create_node(&name).await;
    let node = cluster.get(&format!("/api/v1/nodes/{name}")).await.body;
    assert!(node["spec"].is_object(), "{node}");
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"], 0,
        "{node}"
    );
    for field in [
        "machineID",
        "systemUUID",
        "bootID",
        "kubeletVersion",
        "architecture",
    ] {
        assert_eq!(node["status"]["nodeInfo"][field], "", "{field}: {node}");
    }
    assert!(node["metadata"]["creationTimestamp"].is_string());

    let lease = cluster
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!((lease.status, &lease.body["spec"]), (201, &json!({})));
    cluster.delete(&format!("/api/v1/nodes/{name}"), None).await;
}
