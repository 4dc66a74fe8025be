//! TokenReviews and SubjectAccessReviews as kube-apiserver answers them: created (201) and
//! echoed with a status, validated with its messages. The kubelet API asks both.

use nodepulse_emulator::{AuthConfig, EmulatorConfig, User};
use serde_json::json;

use crate::common::{Cluster, test_config};

#[tokio::test]
async fn a_subject_access_review_is_answered_and_an_incomplete_one_refused() {
    let cluster = Cluster::start().await;
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "someone", "groups": ["system:masters"],
            "resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1", "version": "v1"}}});
    let answer = cluster.post(path, &review).await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    assert_eq!(answer.body["kind"], "SubjectAccessReview");
    assert_eq!(answer.body["status"]["allowed"], true, "system:masters may");
    assert_eq!(
        answer.body["spec"]["resourceAttributes"]["subresource"],
        "proxy"
    );

    let nobody = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "nodes"}}});
    let refused = cluster.post(path, &nobody).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert_eq!(
        refused.body["message"],
        ".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
}

#[tokio::test]
async fn a_token_review_needs_a_token_and_does_not_accept_an_unknown_one() {
    let cluster = Cluster::start().await;
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let empty = cluster
        .post(
            path,
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}),
        )
        .await;
    assert_eq!(
        (empty.status, empty.body["message"].as_str()),
        (
            400,
            Some("token is required for TokenReview in authentication")
        )
    );
    let unknown = cluster
        .post(path, &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token-anyone-issued"}}))
        .await;
    assert_eq!(unknown.status, 201, "{:?}", unknown.body);
    assert_ne!(unknown.body["status"]["authenticated"], true);
    assert!(
        unknown.body["status"]["error"].is_string(),
        "{:?}",
        unknown.body
    );
}

#[tokio::test]
async fn a_token_review_of_a_known_token_names_its_user() {
    let mut auth = AuthConfig::default();
    auth.tokens
        .insert("alice-token".into(), User::admin("alice"));
    let Some(cluster) = Cluster::emulator_only(
        "a_token_review_of_a_known_token_names_its_user",
        EmulatorConfig {
            auth,
            ..test_config()
        },
    )
    .await
    else {
        return;
    };
    let answer = cluster
        .post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "alice-token"}}),
        )
        .await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    assert_eq!(
        answer.body["status"],
        json!({"authenticated": true, "user": {"username": "alice", "groups": ["system:masters", "system:authenticated"]},
            "audiences": ["https://kubernetes.default.svc.cluster.local"]})
    );
}
