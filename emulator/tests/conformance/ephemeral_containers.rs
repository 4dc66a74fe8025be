//! The `pods/ephemeralcontainers` subresource as kube-apiserver serves it to `kubectl debug`:
//! a patch there adds an ephemeral container (defaulted, the pod's generation bumped) and
//! changes nothing else; one already there may not be removed.

use serde_json::json;

use crate::common::{Cluster, unique};

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn an_ephemeral_container_is_added_through_the_subresource_and_never_removed() {
    let cluster = Cluster::start().await;
    let name = unique("debug-target");
    let created = cluster
        .post(
            PODS,
            &json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "image": "busybox:1"}]}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let path = format!("{PODS}/{name}/ephemeralcontainers");
    let patch = json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1", "stdin": true, "tty": true}],
        "containers": [{"name": "app", "image": "changed:1"}]}});
    let patched = cluster
        .patch(&path, "application/strategic-merge-patch+json", &patch)
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.body["metadata"]["generation"], 2);
    assert_eq!(
        patched.body["spec"]["containers"][0]["image"], "busybox:1",
        "only ephemeral containers change"
    );
    let debugger = &patched.body["spec"]["ephemeralContainers"][0];
    assert_eq!(
        (
            debugger["name"].as_str(),
            debugger["terminationMessagePolicy"].as_str(),
            debugger["imagePullPolicy"].as_str()
        ),
        (Some("debugger"), Some("File"), Some("IfNotPresent"))
    );
    let got = cluster.get(&path).await;
    assert_eq!(
        (got.status, got.body["kind"].as_str()),
        (200, Some("Pod")),
        "{}",
        got.body
    );
    let mut removed = got.body.clone();
    removed["spec"]["ephemeralContainers"] = json!([]);
    let refused = cluster.put(&path, &removed).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    let message = refused.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("existing ephemeral containers \"debugger\" may not be removed"),
        "{message}"
    );
}
