//! What every real cluster does to every pod and namespace: the ServiceAccount admission plugin
//! runs a pod as `default` with the `kube-api-access-<suffix>` projected volume mounted in each
//! container (unless automount is off), refuses an account that does not exist, leaves a
//! mirror pod as it is but refuses one that names an account, and
//! kube-controller-manager's root-CA publisher keeps a `kube-root-ca.crt` ConfigMap in every
//! namespace, putting it back when it is deleted.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Cluster, eventually, unique};

const PODS: &str = "/api/v1/namespaces/default/pods";
const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A pod bound to a node that does not exist, so nothing on a real cluster runs it.
fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["nodeName"] = json!(unique("nonode"));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn a_pod_runs_as_default_with_the_api_access_volume_in_every_container() {
    let cluster = Cluster::start().await;
    let own = json!({"name": "data", "mountPath": MOUNT_PATH});
    let spec = json!({
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
        "containers": [{"name": "a", "image": "busybox:1.36"},
            {"name": "b", "image": "busybox:1.36", "volumeMounts": [own]}],
        "volumes": [{"name": "data", "emptyDir": {}}]});
    let created = cluster.post(PODS, &pod(&unique("sa"), spec)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(
        (&spec["serviceAccountName"], &spec["serviceAccount"]),
        (&json!("default"), &json!("default"))
    );
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    assert_eq!(volumes.len(), 2, "{volumes:?}");
    let name = volumes[1]["name"].as_str().unwrap_or("").to_string();
    let suffix = name.strip_prefix("kube-api-access-").unwrap_or("");
    assert!(
        suffix.len() == 5
            && suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "{name}"
    );
    assert_eq!(
        volumes[1]["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]})
    );
    let mount = json!([{"name": name, "readOnly": true, "mountPath": MOUNT_PATH}]);
    assert_eq!(spec["initContainers"][0]["volumeMounts"], mount);
    assert_eq!(spec["containers"][0]["volumeMounts"], mount);
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([own]),
        "a container with its own mount there keeps it"
    );
}

#[tokio::test]
async fn automount_off_gives_no_volume_and_a_missing_account_is_forbidden() {
    let cluster = Cluster::start().await;
    let containers = json!([{"name": "c", "image": "busybox:1.36"}]);
    let created = cluster
        .post(
            PODS,
            &pod(
                &unique("noauto"),
                json!({"automountServiceAccountToken": false, "containers": containers}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(spec.get("volumes"), None, "{spec}");
    assert_eq!(spec["containers"][0].get("volumeMounts"), None, "{spec}");
    assert_eq!(spec["serviceAccountName"], "default");

    let (name, account) = (unique("nosa"), unique("robot"));
    let refused = cluster
        .post(
            PODS,
            &pod(
                &name,
                json!({"serviceAccountName": account, "containers": containers}),
            ),
        )
        .await;
    assert_eq!(
        (refused.status, refused.body["reason"].as_str()),
        (403, Some("Forbidden")),
        "{:?}",
        refused.body
    );
    assert_eq!(
        refused.body["message"],
        format!(
            "pods {name:?} is forbidden: error looking up service account default/{account}: serviceaccount {account:?} not found"
        )
    );
}

#[tokio::test]
async fn every_namespace_has_the_root_ca_config_map_and_gets_it_back_when_deleted() {
    let cluster = Cluster::start().await;
    let namespace = unique("rootca");
    let created = cluster
        .post(
            "/api/v1/namespaces",
            &json!({"metadata": {"name": namespace}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let path = format!("/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt");
    let uid_of = |body: &Value| body["metadata"]["uid"].as_str().map(str::to_string);
    let first = eventually("kube-root-ca.crt", Duration::from_secs(30), || async {
        let reply = cluster.get(&path).await;
        (reply.status == 200).then_some(reply.body)
    })
    .await;
    let ca = first["data"]["ca.crt"].as_str().unwrap_or("");
    assert!(
        ca.starts_with("-----BEGIN CERTIFICATE-----\n")
            && ca.trim_end().ends_with("-----END CERTIFICATE-----"),
        "{first}"
    );
    assert!(first["metadata"]["annotations"]["kubernetes.io/description"].is_string());
    let deleted = cluster.delete(&path, None).await;
    assert_eq!(deleted.status, 200, "{:?}", deleted.body);
    let again = eventually(
        "kube-root-ca.crt again",
        Duration::from_secs(30),
        || async {
            let reply = cluster.get(&path).await;
            (reply.status == 200 && uid_of(&reply.body) != uid_of(&first)).then_some(reply.body)
        },
    )
    .await;
    assert_eq!(again["data"], first["data"]);
}

#[tokio::test]
async fn a_mirror_pod_is_not_changed_and_may_not_name_an_account() {
    let cluster = Cluster::start().await;
    let mirror = |name: &str, spec: Value| {
        let mut pod = pod(name, spec);
        pod["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "static"});
        pod
    };
    let containers = json!([{"name": "c", "image": "busybox:1.36"}]);
    let created = cluster
        .post(
            PODS,
            &mirror(&unique("mirror"), json!({"containers": containers})),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(
        (spec.get("serviceAccountName"), spec.get("volumes")),
        (None, None),
        "{spec}"
    );
    let name = unique("mirror");
    let refused = cluster
        .post(
            PODS,
            &mirror(
                &name,
                json!({"serviceAccountName": "default", "containers": containers}),
            ),
        )
        .await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert_eq!(
        refused.body["message"],
        format!("pods {name:?} is forbidden: a mirror pod may not reference service accounts")
    );
}
