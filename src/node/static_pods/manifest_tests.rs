//! A manifest's pod as the kubelet makes it, and the manifests it refuses with its texts.

use std::path::Path;

use super::*;

const ETCD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {component: etcd}
spec:
  hostNetwork: true
  tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 5}]
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
";

fn read(data: &str) -> Result<Pod, ManifestError> {
    static_pod(
        data.as_bytes(),
        Path::new("/etc/kubernetes/manifests/etcd.yaml"),
        "Node-1",
    )
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[test]
fn a_manifest_runs_as_name_dash_node_with_a_content_uid_and_the_kubelets_defaults() {
    let pod = read(ETCD).expect("a pod");
    let uid = pod.metadata.uid.clone().expect("a uid");
    assert_eq!(uid.len(), 32, "128 bits in hex: {uid}");
    assert!(
        uid.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(pod.metadata.name.as_deref(), Some("etcd-node-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        annotation(&pod, "kubernetes.io/config.hash"),
        Some(uid.as_str())
    );
    assert_eq!(
        annotation(&pod, "kubernetes.io/config.source"),
        Some("file")
    );
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("Node-1"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    let tolerations = spec.tolerations.as_deref().expect("tolerations");
    assert_eq!(
        tolerations.len(),
        1,
        "the manifest's own is updated: {tolerations:?}"
    );
    assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[0].effect.as_deref(), Some("NoExecute"));
    assert_eq!(tolerations[0].toleration_seconds, None);
    assert_eq!(
        pod.status.and_then(|status| status.phase).as_deref(),
        Some("Pending")
    );

    let default_namespace = read(&ETCD.replace("  namespace: kube-system\n", "")).expect("a pod");
    assert_eq!(
        default_namespace.metadata.namespace.as_deref(),
        Some("default")
    );
}

#[test]
fn the_uid_is_the_same_for_the_same_manifest_and_changes_with_content_node_or_file() {
    let uid = |data: &str, path: &str, node: &str| {
        static_pod(data.as_bytes(), Path::new(path), node)
            .expect("a pod")
            .metadata
            .uid
            .expect("uid")
    };
    let path = "/etc/kubernetes/manifests/etcd.yaml";
    let first = uid(ETCD, path, "node-1");
    assert_eq!(
        uid(ETCD, path, "node-1"),
        first,
        "a restart adopts what runs"
    );
    let as_json = serde_json::to_string(&serde_yaml_ng::from_str::<Value>(ETCD).unwrap()).unwrap();
    assert_eq!(
        uid(&as_json, path, "node-1"),
        first,
        "the content, not its spelling"
    );
    assert_ne!(
        uid(&ETCD.replace("3.5.21-0", "3.5.22-0"), path, "node-1"),
        first
    );
    assert_ne!(uid(ETCD, path, "node-2"), first);
    assert_ne!(
        uid(ETCD, "/etc/kubernetes/manifests/etcd2.yaml", "node-1"),
        first
    );
    let given = ETCD.replace("  name: etcd\n", "  name: etcd\n  uid: my-uid\n");
    assert_eq!(
        uid(&given, path, "node-1"),
        "my-uid",
        "a manifest's own UID is kept"
    );
}

#[test]
fn a_manifest_that_is_not_one_runnable_pod_is_refused_in_the_kubelets_words() {
    let refused = |data: &str| read(data).expect_err("refused").to_string();
    assert_eq!(
        refused(&ETCD.replace("  name: etcd\n  namespace", "  namespace")),
        "invalid pod: name is needed for the pod"
    );
    let list = "apiVersion: v1\nkind: PodList\nitems: []\n";
    assert!(
        refused(list).starts_with("/etc/kubernetes/manifests/etcd.yaml: couldn't parse as pod("),
        "{}",
        refused(list)
    );
    assert!(refused(&format!("{ETCD}---\n{ETCD}")).ends_with("please check config file"));
    assert!(refused("{not yaml").contains("couldn't parse as pod"));
    assert_eq!(
        refused(&ETCD.replace("    image: registry.k8s.io/etcd:3.5.21-0\n", "")),
        "invalid pod: [spec.containers[0].image: Required value]"
    );
    let big = format!("{ETCD}# {}\n", "x".repeat(MAX_MANIFEST_BYTES));
    assert!(refused(&big).contains("larger than"));
}

#[test]
fn a_static_pod_may_not_reference_api_objects() {
    let with = |extra: &str| format!("{ETCD}{extra}");
    let cases = [
        ("  serviceAccountName: etcd\n", "serviceaccounts"),
        ("  imagePullSecrets: [{name: pull}]\n", "secrets"),
        (
            "    env: [{name: A, valueFrom: {configMapKeyRef: {name: c, key: k}}}]\n",
            "configmaps",
        ),
        (
            "  volumes: [{name: v, configMap: {name: c}}]\n",
            "configmaps (via configmap volumes)",
        ),
        (
            "  volumes: [{name: v, persistentVolumeClaim: {claimName: c}}]\n",
            "persistentvolumeclaims",
        ),
        (
            "  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n",
            "serviceaccounts (via projected volumes)",
        ),
    ];
    for (extra, resource) in cases {
        assert_eq!(
            read(&with(extra)).expect_err(extra).to_string(),
            format!("static pods may not reference {resource}")
        );
    }
    let host_path = with("  volumes: [{name: data, hostPath: {path: /var/lib/etcd}}]\n");
    assert!(read(&host_path).is_ok(), "a hostPath needs no API object");
}

#[test]
fn a_url_pod_is_of_source_http_its_uid_hashed_with_the_url_and_not_the_node_and_no_toleration() {
    let url = "http://127.0.0.1:8080/pods";
    let pods = url_pods(ETCD.as_bytes(), url, "Node-1").expect("a pod");
    let [pod] = pods.as_slice() else {
        panic!("one pod: {pods:?}")
    };
    assert_eq!(pod.metadata.name.as_deref(), Some("etcd-node-1"));
    assert_eq!(annotation(pod, "kubernetes.io/config.source"), Some("http"));
    let uid = pod.metadata.uid.clone().expect("a uid");
    assert_eq!(
        annotation(pod, "kubernetes.io/config.hash"),
        Some(uid.as_str())
    );
    let on_other_node = url_pods(ETCD.as_bytes(), url, "node-2").expect("a pod");
    assert_eq!(
        on_other_node[0].metadata.uid.as_deref(),
        Some(uid.as_str()),
        "the URL's hash has no node in it"
    );
    let elsewhere =
        url_pods(ETCD.as_bytes(), "http://127.0.0.1:8080/other", "Node-1").expect("a pod");
    assert_ne!(elsewhere[0].metadata.uid.as_deref(), Some(uid.as_str()));
    let from_file = read(ETCD).expect("a pod");
    assert_ne!(from_file.metadata.uid.as_deref(), Some(uid.as_str()));
    // The manifest's own toleration stays; none is added (the kubelet adds it to files only).
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.clone());
    assert_eq!(tolerations.map(|t| t.len()), Some(1));
    let bare = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: a, image: b}]}\n";
    let bare = url_pods(bare.as_bytes(), url, "n").expect("a pod");
    assert_eq!(
        bare[0].spec.as_ref().and_then(|s| s.tolerations.clone()),
        None
    );
}

#[test]
fn a_url_body_that_is_neither_a_pod_nor_a_pod_list_is_refused_in_the_kubelets_words() {
    let url = "http://h/pods";
    let error = url_pods(b"apiVersion: v1\nkind: Service\n", url, "n").expect_err("refused");
    assert_eq!(
        error.to_string(),
        "http://h/pods: received 'apiVersion: v1\nkind: Service\n', but couldn't parse as \
         single (not a v1 Pod: Service) or multiple pods (not a v1 PodList: Service)"
    );
    let empty_list = url_pods(
        b"{\"apiVersion\": \"v1\", \"kind\": \"PodList\", \"items\": []}",
        url,
        "n",
    );
    assert_eq!(empty_list, Ok(Vec::new()));
    let nameless = "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n";
    assert_eq!(
        url_pods(nameless.as_bytes(), url, "n"),
        Err(ManifestError::NoName)
    );
}
