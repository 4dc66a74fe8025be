//! ConfigMaps, Secrets and ServiceAccounts as kube-apiserver serves them to a volume manager:
//! 404 texts, a Secret's `stringData` folded into `data`, `immutable`, the `default`
//! ServiceAccount of every namespace (made again when deleted), and TokenRequest's defaults and
//! bound-pod checks.

use serde_json::json;

use crate::common::{Cluster, unique};

const NS: &str = "/api/v1/namespaces/default";

#[tokio::test]
async fn a_missing_config_map_or_secret_is_a_404_naming_it() {
    let cluster = Cluster::start().await;
    let missing = unique("missing");
    for (plural, path) in [("configmaps", "configmaps"), ("secrets", "secrets")] {
        let reply = cluster.get(&format!("{NS}/{path}/{missing}")).await;
        assert_eq!(reply.status, 404, "{}", reply.body);
        assert_eq!(reply.body["reason"], "NotFound");
        assert_eq!(
            reply.body["message"],
            format!("{plural} \"{missing}\" not found")
        );
    }
}

#[tokio::test]
async fn a_secret_gets_string_data_as_base64_data_and_type_opaque() {
    let cluster = Cluster::start().await;
    let name = unique("secret");
    let reply = cluster
        .post(
            &format!("{NS}/secrets"),
            &json!({"metadata": {"name": name}, "data": {"a": "eA=="}, "stringData": {"a": "overrides", "b": "plain"}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["type"], "Opaque");
    assert_eq!(
        reply.body["data"],
        json!({"a": "b3ZlcnJpZGVz", "b": "cGxhaW4="})
    );
    assert!(reply.body.get("stringData").is_none(), "{}", reply.body);
}

#[tokio::test]
async fn bad_keys_are_invalid_and_an_immutable_config_map_keeps_its_data() {
    let cluster = Cluster::start().await;
    let bad = cluster
        .post(
            &format!("{NS}/configmaps"),
            &json!({"metadata": {"name": unique("bad")}, "data": {"a b": "x"}}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(
        bad.body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters"),
        "{}",
        bad.body
    );
    let name = unique("frozen");
    let created = cluster
        .post(
            &format!("{NS}/configmaps"),
            &json!({"metadata": {"name": name}, "data": {"k": "v"}, "immutable": true}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let mut changed = created.body.clone();
    changed["data"]["k"] = json!("w");
    let reply = cluster
        .put(&format!("{NS}/configmaps/{name}"), &changed)
        .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert_eq!(
        reply.body["message"],
        format!(
            "ConfigMap \"{name}\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        )
    );
}

#[tokio::test]
async fn every_namespace_has_a_default_service_account() {
    let cluster = Cluster::start().await;
    let found = crate::common::eventually(
        "the default ServiceAccount",
        std::time::Duration::from_secs(30),
        || async {
            let reply = cluster.get(&format!("{NS}/serviceaccounts/default")).await;
            (reply.status == 200).then_some(reply.body)
        },
    )
    .await;
    assert_eq!(found["metadata"]["name"], "default");
}

/// kube-controller-manager's service-account controller makes a deleted `default` again (in a
/// namespace of the test's own, so no other pod misses it meanwhile).
#[tokio::test]
async fn a_deleted_default_service_account_comes_back() {
    let cluster = Cluster::start().await;
    let namespace = unique("sa");
    let created = cluster
        .post(
            "/api/v1/namespaces",
            &json!({"metadata": {"name": namespace}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/default");
    let uid = |body: &serde_json::Value| body["metadata"]["uid"].as_str().map(str::to_string);
    let first = crate::common::eventually(
        "the default ServiceAccount",
        std::time::Duration::from_secs(30),
        || async {
            let reply = cluster.get(&path).await;
            (reply.status == 200).then_some(reply.body)
        },
    )
    .await;
    let deleted = cluster.delete(&path, None).await;
    assert_eq!(deleted.status, 200, "{:?}", deleted.body);
    crate::common::eventually(
        "the default ServiceAccount again",
        std::time::Duration::from_secs(30),
        || async {
            let reply = cluster.get(&path).await;
            (reply.status == 200 && uid(&reply.body) != uid(&first)).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_token_request_gets_the_defaults_and_a_bound_pod_is_checked() {
    let cluster = Cluster::start().await;
    let pod_name = unique("tok");
    let pod = cluster
        .post(
            &format!("{NS}/pods"),
            &json!({"metadata": {"name": pod_name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .await;
    assert_eq!(pod.status, 201, "{}", pod.body);
    let uid = pod.body["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let token_path = format!("{NS}/serviceaccounts/default/token");
    let bound =
        |uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid});
    let reply = cluster
        .post(
            &token_path,
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"boundObjectRef": bound(&uid)}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["kind"], "TokenRequest");
    assert_eq!(reply.body["spec"]["expirationSeconds"], 3600);
    assert!(
        !reply.body["spec"]["audiences"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    let token = reply.body["status"]["token"].as_str().unwrap_or_default();
    assert_eq!(token.split('.').count(), 3, "JWT-shaped: {token}");
    assert!(reply.body["status"]["expirationTimestamp"].is_string());

    let short = cluster
        .post(&token_path, &json!({"spec": {"expirationSeconds": 599}}))
        .await;
    assert_eq!(short.status, 422, "{}", short.body);
    assert_eq!(
        short.body["message"],
        "TokenRequest.authentication.k8s.io \"default\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );
    let stale = cluster
        .post(
            &token_path,
            &json!({"spec": {"boundObjectRef": bound("00000000-0000-0000-0000-000000000000")}}),
        )
        .await;
    assert_eq!(stale.status, 409, "{}", stale.body);
    let nobody = cluster
        .post(
            &format!("{NS}/serviceaccounts/{}/token", unique("nobody")),
            &json!({"spec": {}}),
        )
        .await;
    assert_eq!(nobody.status, 404, "{}", nobody.body);
}
