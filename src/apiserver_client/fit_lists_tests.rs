//! A pod as kube-apiserver 1.36 serves it for a busybox pod on a node: its lists are kept at
//! their length, and nothing else of it changes.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::fit_lists;

/// Decoded from text, as the watch decodes (from a `Value`, serde would know each length).
pub(crate) fn served_pod() -> Pod {
    let served = json!({
        "metadata": {"name": "sleeper", "namespace": "default", "uid": "u1",
                     "finalizers": ["example.com/keep"],
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "rs", "uid": "r1"}]},
        "spec": {
            "nodeName": "n1",
            "containers": [{
                "name": "main", "image": "busybox",
                "command": ["/bin/sh", "-c", "sleep 3600"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "volumeMounts": [{"name": "kube-api-access-x", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
            }],
            "volumes": [{"name": "kube-api-access-x", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"}
            ],
            "hostIPs": [{"ip": "198.18.0.1"}],
            "podIPs": [{"ip": "198.18.0.7"}],
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "sha256:1", "ready": true,
                "restartCount": 0, "started": true, "state": {"running": {}},
                "volumeMounts": [{"name": "kube-api-access-x", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
            }]
        }
    });
    serde_json::from_str(&served.to_string()).expect("a pod")
}

macro_rules! rooms {
    ($($list:expr),+ $(,)?) => {
        vec![$((stringify!($list), ($list.len(), $list.capacity()))),+]
    };
}

/// (list, (length, capacity)) of the lists the served pod has.
fn rooms(pod: &Pod) -> Vec<(&'static str, (usize, usize))> {
    let spec = pod.spec.as_ref().unwrap();
    let status = pod.status.as_ref().unwrap();
    let container = &spec.containers[0];
    let volumes = spec.volumes.as_ref().unwrap();
    let sources = volumes[0]
        .projected
        .as_ref()
        .unwrap()
        .sources
        .as_ref()
        .unwrap();
    let statuses = status.container_statuses.as_ref().unwrap();
    rooms![
        pod.metadata.finalizers.as_ref().unwrap(),
        pod.metadata.owner_references.as_ref().unwrap(),
        spec.containers,
        container.command.as_ref().unwrap(),
        container.env.as_ref().unwrap(),
        container.volume_mounts.as_ref().unwrap(),
        volumes,
        sources,
        sources[1]
            .config_map
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap(),
        sources[2]
            .downward_api
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap(),
        spec.tolerations.as_ref().unwrap(),
        status.conditions.as_ref().unwrap(),
        status.host_ips.as_ref().unwrap(),
        status.pod_ips.as_ref().unwrap(),
        statuses,
        statuses[0].volume_mounts.as_ref().unwrap(),
    ]
}

fn roomy(pod: &Pod) -> Vec<&'static str> {
    (rooms(pod).into_iter())
        .filter(|(_, (len, capacity))| len != capacity)
        .map(|(list, _)| list)
        .collect()
}

#[test]
fn a_kept_pods_lists_have_no_room_beyond_their_length_and_the_pod_is_unchanged() {
    let mut pod = served_pod();
    let decoded = roomy(&pod);
    assert!(
        decoded.contains(&"statuses") && decoded.contains(&"status.conditions.as_ref().unwrap()"),
        "decoding leaves room: {decoded:?}"
    );
    fit_lists(&mut pod);
    assert_eq!(pod, served_pod(), "nothing but capacity changes");
    assert_eq!(roomy(&pod), Vec::<&str>::new(), "lists with room left");
}
