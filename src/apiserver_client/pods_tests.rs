//! The node's pod watch as its subscribers see it.

use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;

/// A pod as the API server serves it after `kubectl apply` and one status write.
pub(crate) fn applied_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u1",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Pod\"}"},
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}}}}}},
                {"manager": "nodepulse", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}
            ]
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Running"}
    }))
    .expect("a pod")
}

#[test]
fn a_watched_pod_is_kept_without_its_managed_fields_and_with_everything_else() {
    let mut relist = Relist::default();
    let events = relist.step(Ok(Event::Apply(applied_pod())));
    let [PodWatchEvent::Applied(pod)] = &events[..] else {
        panic!("one applied pod: {events:?}");
    };
    let pod = pod.pod();
    assert_eq!(pod.metadata.managed_fields, None);
    let mut expected = applied_pod();
    expected.metadata.managed_fields = None;
    assert_eq!(*pod, expected);
    assert!(
        (pod.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key("kubectl.kubernetes.io/last-applied-configuration")),
        "annotations are the pod's own, which the downward API shows: {pod:?}"
    );
}

#[test]
fn a_watched_pod_is_kept_with_its_lists_at_their_length() {
    let pod = kept_pod(crate::apiserver_client::fit_lists::tests::served_pod()).pod();
    let statuses = pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap();
    assert_eq!((statuses.len(), statuses.capacity()), (1, 1));
}
