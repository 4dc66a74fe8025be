//! Create, get, list, update: object metadata, the global resourceVersion and the `Status`
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
async fn put_with_stale_resource_version_is_409_conflict_and_without_one_is_unconditional() {
    // A Namespace: like Nodes it allows unconditional updates, and unlike Nodes no controller
    // writes it, so the versions below are the test's own.
    let cluster = Cluster::start().await;
    let name = unique("put");
    let path = format!("/api/v1/namespaces/{name}");
    let created = cluster
        .post("/api/v1/namespaces", &json!({"metadata": {"name": name}}))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let created = created.body;
    let mut first = created.clone();
    first["metadata"]["labels"]["step"] = "b".into();
    let updated = cluster.put(&path, &first).await;
    assert_eq!(updated.status, 200, "{:?}", updated.body);
    assert!(rv(&updated.body) > rv(&created));

    let mut stale = created.clone();
    stale["metadata"]["labels"]["step"] = "c".into();
    let conflict = cluster.put(&path, &stale).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body["reason"], "Conflict");
    assert_eq!(
        conflict.body["message"],
        format!(
            "Operation cannot be fulfilled on namespaces \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    assert_eq!(
        conflict.body["details"],
        json!({"name": name, "kind": "namespaces"})
    );

    // Namespaces (like nodes, pods and events) allow an unconditional update.
    let mut unconditional = created.clone();
    unconditional["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    unconditional["metadata"]["labels"]["step"] = "d".into();
    let reply = cluster.put(&path, &unconditional).await;
    assert_eq!(
        (
            reply.status,
            reply.body["metadata"]["labels"]["step"].as_str()
        ),
        (200, Some("d"))
    );
    cluster.delete(&path, None).await;
}

#[tokio::test]
async fn a_lease_put_without_resource_version_is_422_and_changes_nothing() {
    let cluster = Cluster::start().await;
    let name = unique("lease-put");
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}");
    let created = cluster
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": name}, "spec": {"holderIdentity": "a"}}),
        )
        .await;
    assert_eq!(created.status, 201);
    let mut current = created.body.clone();
    current["spec"]["holderIdentity"] = "b".into();
    let updated = cluster.put(&path, &current).await;
    assert_eq!(updated.status, 200, "the current version is accepted");
    let conflict = cluster.put(&path, &current).await;
    assert_eq!(conflict.status, 409, "the same version again is stale");
    assert_eq!(
        conflict.body["details"],
        json!({"name": name, "group": "coordination.k8s.io", "kind": "leases"})
    );
    assert_eq!(
        conflict.body["message"],
        format!(
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );

    let mut unconditional = created.body.clone();
    unconditional["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    unconditional["spec"]["holderIdentity"] = "c".into();
    let reply = cluster.put(&path, &unconditional).await;
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("leases.coordination.k8s.io \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"),
            "reason": "Invalid",
            "details": {"name": name, "group": "coordination.k8s.io", "kind": "leases", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
                 "field": "metadata.resourceVersion"}]},
            "code": 422})
    );
    let now = cluster.get(&path).await;
    assert_eq!(
        now.body["spec"]["holderIdentity"], "b",
        "the refused PUT changed nothing"
    );
    cluster.delete(&path, None).await;
}

#[tokio::test]
async fn put_with_a_different_uid_is_a_precondition_conflict() {
    let cluster = Cluster::start().await;
    let name = unique("uid");
    let node = cluster.create_node(&name).await;
    let mut body = node.clone();
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000".into();
    let path = format!("/api/v1/nodes/{name}");
    let reply = cluster.put(&path, &body).await;
    assert_eq!(reply.status, 409);
    let uid = node["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        reply.body["message"],
        format!(
            "Operation cannot be fulfilled on nodes \"{name}\": StorageError: invalid object, Code: 4, Key: /registry/minions/{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"
        )
    );
    assert_eq!(
        (reply.body["reason"].as_str(), &reply.body["details"]),
        (Some("Conflict"), &json!({"name": name, "kind": "nodes"}))
    );
    cluster.delete(&path, None).await;
}

#[tokio::test]
async fn a_lease_put_with_a_different_uid_quotes_the_namespaced_storage_key() {
    let cluster = Cluster::start().await;
    let name = unique("uid-lease");
    let created = cluster
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201);
    let mut body = created.body.clone();
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000".into();
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}");
    let reply = cluster.put(&path, &body).await;
    let uid = created.body["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        (reply.status, reply.body["message"].as_str()),
        (409, Some(format!(
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": StorageError: invalid object, Code: 4, Key: /registry/leases/default/{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"
        ).as_str()))
    );
    cluster.delete(&path, None).await;
}

#[tokio::test]
async fn put_to_a_missing_node_is_404_and_name_mismatch_is_400() {
    let cluster = Cluster::start().await;
    let name = unique("ghost");
    let reply = cluster
        .put(
            &format!("/api/v1/nodes/{name}"),
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(reply.status, 404);
    let reply = cluster
        .put(
            &format!("/api/v1/nodes/{name}"),
            &json!({"metadata": {"name": "other"}}),
        )
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body["message"],
        format!("the name of the object (other) does not match the name on the URL ({name})")
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

#[tokio::test]
async fn a_put_to_a_missing_lease_creates_it_as_leases_allow_create_on_update() {
    let cluster = Cluster::start().await;
    let name = unique("put-create");
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}");
    let reply = cluster
        .put(
            &path,
            &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name}, "spec": {"holderIdentity": "h", "leaseDurationSeconds": 40}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    assert_eq!(reply.body["spec"]["holderIdentity"], "h");
    assert!(reply.body["metadata"]["uid"].as_str().is_some());
    let stored = cluster.get(&path).await;
    assert_eq!(
        (
            stored.status,
            stored.body["spec"]["leaseDurationSeconds"].as_i64()
        ),
        (200, Some(40))
    );
    cluster.delete(&path, None).await;
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
