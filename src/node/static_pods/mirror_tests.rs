//! The mirror pod rules on fixed pods: create, replace, recreate, remove, and never before
//! the API's list.

use serde_json::json;

use nodepulse_actors::kept_pod::KeptPod;

use super::*;

fn static_pod(name: &str, hash: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kube-system", "uid": hash, "labels": {"component": "etcd"},
            "annotations": {"kubernetes.io/config.hash": hash, "kubernetes.io/config.source": "file"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]},
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

fn mirror(name: &str, uid: &str, hash: &str) -> Pod {
    let mut pod = static_pod(name, hash);
    pod.metadata.uid = Some(uid.to_owned());
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(MIRROR_ANNOTATION.to_owned(), hash.to_owned());
    pod
}

fn said(actions: &[MirrorAction]) -> Vec<String> {
    actions
        .iter()
        .map(|action| match action {
            MirrorAction::Create(pod) => {
                format!("create {}", pod.metadata.name.as_deref().unwrap())
            }
            MirrorAction::Delete { name, uid, .. } => format!("delete {name} {uid}"),
        })
        .collect()
}

fn plan(statics: &[Pod], mirrors: &[Pod]) -> MirrorPlan {
    let mut plan = MirrorPlan::default();
    plan.set_static_pods(statics.iter(), true);
    for mirror in mirrors {
        plan.observe(PodWatchEvent::Applied(KeptPod::from(mirror.clone())));
    }
    plan
}

#[test]
fn nothing_is_called_before_the_api_listed_the_nodes_pods() {
    let plan = plan(&[static_pod("etcd-n1", "h1")], &[]);
    assert!(plan.actions().is_empty());
}

#[test]
fn a_static_pod_gets_a_mirror_and_a_matching_one_is_left_alone() {
    let mut plan = plan(
        &[static_pod("etcd-n1", "h1"), static_pod("api-n1", "h2")],
        &[mirror("etcd-n1", "m1", "h1")],
    );
    plan.observe(PodWatchEvent::Listed);
    assert_eq!(said(&plan.actions()), ["create api-n1"]);
}

#[test]
fn a_mirror_of_another_hash_or_being_deleted_is_deleted_by_uid_and_an_orphan_goes() {
    let mut deleting = mirror("api-n1", "m2", "h2");
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        ));
    let mut plan = plan(
        &[
            static_pod("etcd-n1", "h1-edited"),
            static_pod("api-n1", "h2"),
        ],
        &[
            mirror("etcd-n1", "m1", "h1"),
            deleting,
            mirror("gone-n1", "m3", "h3"),
        ],
    );
    plan.observe(PodWatchEvent::Listed);
    assert_eq!(
        said(&plan.actions()),
        ["delete api-n1 m2", "delete etcd-n1 m1", "delete gone-n1 m3"]
    );
    // Once the watch says a mirror is gone, it is made again.
    plan.observe(PodWatchEvent::Deleted(KeptPod::from(mirror(
        "etcd-n1", "m1", "h1",
    ))));
    assert!(said(&plan.actions()).contains(&"create etcd-n1".to_owned()));
    // A late delete of an older mirror does not forget the one there now.
    plan.observe(PodWatchEvent::Applied(KeptPod::from(mirror(
        "etcd-n1",
        "m4",
        "h1-edited",
    ))));
    plan.observe(PodWatchEvent::Deleted(KeptPod::from(mirror(
        "etcd-n1", "m1", "h1",
    ))));
    assert!(
        !said(&plan.actions())
            .iter()
            .any(|action| action.contains("etcd-n1"))
    );
}

#[test]
fn the_mirror_pod_is_the_static_pod_with_the_mirror_annotation_owned_by_the_node() {
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": "n1", "uid": "node-uid"}})).unwrap();
    let mirror = mirror_pod(&static_pod("etcd-n1", "h1"), &node).expect("a mirror");
    let value = serde_json::to_value(&mirror).unwrap();
    assert_eq!(value["metadata"]["annotations"][MIRROR_ANNOTATION], "h1");
    assert_eq!(
        value["metadata"]["annotations"]["kubernetes.io/config.hash"],
        "h1"
    );
    assert_eq!(value["metadata"]["labels"]["component"], "etcd");
    assert_eq!(
        value["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid", "controller": true}])
    );
    assert!(
        value["metadata"].get("uid").is_none(),
        "the API server gives it its own"
    );
    assert!(value.get("status").is_none());
    assert_eq!(value["spec"]["nodeName"], "n1");

    let unnamed: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    assert_eq!(
        mirror_pod(&static_pod("etcd-n1", "h1"), &unnamed)
            .unwrap_err()
            .to_string(),
        "failed to get node UID: UID unset for node n1"
    );
}

#[test]
fn an_orphan_waits_until_every_static_source_was_read() {
    let mut plan = plan(&[], &[mirror("served-n1", "m1", "h1")]);
    plan.observe(PodWatchEvent::Listed);
    // The file source read, the URL not yet: its mirror pod may well be no orphan.
    plan.set_static_pods(std::iter::empty(), false);
    assert!(plan.actions().is_empty(), "{:?}", said(&plan.actions()));
    plan.set_static_pods(std::iter::empty(), true);
    assert_eq!(said(&plan.actions()), ["delete served-n1 m1"]);
}
