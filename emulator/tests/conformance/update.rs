//! Updates (PUT): optimistic concurrency, which kinds allow an unconditional update or a
//! create on update, and the UID precondition's Conflict, as kube-apiserver answers them.

use serde_json::json;

use crate::common::{Cluster, rv, unique};

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
