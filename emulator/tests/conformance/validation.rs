//! What kube-apiserver's typed decode and validation refuse, for the fields nodepulse writes:
//! a body whose fields have the wrong type (400 on create/update, 422 on `patch` for a
//! patch), a Lease duration that is not positive (on create and on update), names that are
//! not DNS subdomains.

use serde_json::json;

use crate::common::{Cluster, unique};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const SMP: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";

#[tokio::test]
async fn a_lease_duration_that_is_not_positive_is_422_on_create_put_and_patch() {
    let cluster = Cluster::start().await;
    let name = unique("duration");
    let refused = cluster
        .post(
            LEASES,
            &json!({"metadata": {"name": name}, "spec": {"leaseDurationSeconds": -1}}),
        )
        .await;
    assert_eq!(refused.status, 422);
    assert_eq!(
        refused.body["message"],
        format!(
            "Lease.coordination.k8s.io \"{name}\" is invalid: spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0"
        )
    );
    assert_eq!(
        refused.body["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than 0",
                "field": "spec.leaseDurationSeconds"}])
    );

    let created = cluster
        .post(
            LEASES,
            &json!({"metadata": {"name": name}, "spec": {"leaseDurationSeconds": 40}}),
        )
        .await;
    assert_eq!(created.status, 201);
    let path = format!("{LEASES}/{name}");
    let mut zero = created.body.clone();
    zero["spec"]["leaseDurationSeconds"] = 0.into();
    let put = cluster.put(&path, &zero).await;
    let patched = cluster
        .patch(&path, MERGE, &json!({"spec": {"leaseDurationSeconds": -5}}))
        .await;
    for (reply, value) in [(put, 0), (patched, -5)] {
        assert_eq!(
            (
                reply.status,
                reply.body["details"]["causes"][0]["field"].as_str()
            ),
            (422, Some("spec.leaseDurationSeconds")),
            "{:?}",
            reply.body
        );
        assert_eq!(
            reply.body["details"]["causes"][0]["message"],
            format!("Invalid value: {value}: must be greater than 0")
        );
    }
    let stored = cluster.get(&path).await;
    assert_eq!(stored.body["spec"]["leaseDurationSeconds"], 40);
}

#[tokio::test]
async fn a_body_with_a_field_of_the_wrong_type_is_400_cannot_be_handled() {
    let cluster = Cluster::start().await;
    let name = unique("typed");
    let reply = cluster
        .post(
            LEASES,
            &json!({"metadata": {"name": name}, "spec": {"leaseDurationSeconds": "forty"}}),
        )
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (400, Some("BadRequest"))
    );
    assert!(
        reply.body["message"].as_str().is_some_and(
            |m| m.starts_with("Lease in version \"v1\" cannot be handled as a Lease: ")
        ),
        "{}",
        reply.body["message"]
    );
    let missing = cluster.get(&format!("{LEASES}/{name}")).await;
    assert_eq!(missing.status, 404, "nothing was stored");
}

#[tokio::test]
async fn a_pod_status_patch_with_a_field_of_the_wrong_type_is_422_on_patch() {
    let cluster = Cluster::start().await;
    let name = unique("pod-typed");
    let pod = json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
    let created = cluster.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let status = format!("/api/v1/namespaces/default/pods/{name}/status");
    let patch = json!({"status": {"containerStatuses": [{"name": "app", "restartCount": "three",
        "ready": false, "image": "registry.k8s.io/pause:3.10", "imageID": ""}]}});
    let reply = cluster.patch(&status, SMP, &patch).await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (422, Some("Invalid")),
        "{:?}",
        reply.body
    );
    assert_eq!(reply.body["details"]["causes"][0]["field"], "patch");
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(" \"\" is invalid: patch: Invalid value: ")),
        "{}",
        reply.body["message"]
    );
    let fine = json!({"status": {"containerStatuses": [{"name": "app", "restartCount": 3,
        "ready": false, "image": "registry.k8s.io/pause:3.10", "imageID": ""}]}});
    let reply = cluster.patch(&status, SMP, &fine).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        reply.body["status"]["containerStatuses"][0]["restartCount"],
        3
    );
}

#[tokio::test]
async fn names_that_are_not_dns_subdomains_are_422_on_metadata_name() {
    let cluster = Cluster::start().await;
    for name in ["Upper", "under_score", "-leading", "trailing-", "a..b"] {
        let reply = cluster
            .post(LEASES, &json!({"metadata": {"name": name}}))
            .await;
        assert_eq!(
            (
                reply.status,
                reply.body["details"]["causes"][0]["field"].as_str()
            ),
            (422, Some("metadata.name")),
            "{name}: {:?}",
            reply.body
        );
    }
}
