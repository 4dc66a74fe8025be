//! Bearer tokens and node restriction (emulator only: a real cluster's credentials are its own).

use nodepulse_emulator::{AuthConfig, EmulatorConfig, User};
use serde_json::json;

use crate::common::{Cluster, test_config, unique};

async fn restricted_cluster(test: &str) -> Option<Cluster> {
    let mut auth = AuthConfig {
        allow_anonymous: false,
        node_restriction: true,
        ..AuthConfig::default()
    };
    auth.tokens
        .insert("admin-token".into(), User::admin("admin"));
    auth.tokens
        .insert("node-a-token".into(), User::node("node-a"));
    Cluster::emulator_only(
        test,
        EmulatorConfig {
            auth,
            ..test_config()
        },
    )
    .await
}

async fn call(
    base: &str,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/strategic-merge-patch+json")
            .body(body.to_string());
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401_unauthorized() {
    let Some(cluster) =
        restricted_cluster("requests_without_a_valid_token_are_401_unauthorized").await
    else {
        return;
    };
    let base = cluster.emulator().base_url();
    let (status, body) = call(&base, None, reqwest::Method::GET, "/api/v1/nodes", None).await;
    assert_eq!(
        (status, body["reason"].as_str(), body["message"].as_str()),
        (401, Some("Unauthorized"), Some("Unauthorized"))
    );
    assert_eq!(
        call(
            &base,
            Some("wrong"),
            reqwest::Method::GET,
            "/api/v1/nodes",
            None
        )
        .await
        .0,
        401
    );
    assert_eq!(
        call(
            &base,
            Some("admin-token"),
            reqwest::Method::GET,
            "/api/v1/nodes",
            None
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn a_node_identity_may_patch_only_its_own_node() {
    let Some(cluster) = restricted_cluster("a_node_identity_may_patch_only_its_own_node").await
    else {
        return;
    };
    let base = cluster.emulator().base_url();
    let other = unique("other");
    let post = |name: &str| {
        let body = json!({"metadata": {"name": name}}).to_string();
        let base = base.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{base}/api/v1/nodes"))
                .bearer_auth("admin-token")
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await
                .expect("sent")
                .status()
                .as_u16()
        }
    };
    assert_eq!(post("node-a").await, 201);
    assert_eq!(post(&other).await, 201);
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let (own, _) = call(
        &base,
        Some("node-a-token"),
        reqwest::Method::PATCH,
        "/api/v1/nodes/node-a/status",
        Some(patch.clone()),
    )
    .await;
    assert_eq!(own, 200);
    let (status, body) = call(
        &base,
        Some("node-a-token"),
        reqwest::Method::PATCH,
        &format!("/api/v1/nodes/{other}/status"),
        Some(patch),
    )
    .await;
    assert_eq!((status, body["reason"].as_str()), (403, Some("Forbidden")));
    assert_eq!(
        body["message"],
        format!(
            "nodes \"{other}\" is forbidden: node \"node-a\" is not allowed to modify node \"{other}\""
        )
    );
}

#[tokio::test]
async fn kubeconfig_with_a_token_authenticates_the_kube_client() {
    let Some(cluster) =
        restricted_cluster("kubeconfig_with_a_token_authenticates_the_kube_client").await
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    cluster
        .emulator()
        .write_kubeconfig_with_token(&path, Some("admin-token"))
        .expect("written");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("readable");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("valid");
    let client = kube::Client::try_from(config).expect("client");
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    nodes
        .list(&Default::default())
        .await
        .expect("authenticated list succeeds");
}
