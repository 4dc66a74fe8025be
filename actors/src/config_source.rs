//! Where a pod came from, as the kubelet marks it (`kl/types/pod_update.go`): the
//! `kubernetes.io/config.*` annotations, and the two questions every part asks of a pod —
//! is it static (from a manifest, run here without the API server) and is it a mirror pod (a
//! static pod's copy in the API, never run). Pure; no part keeps its own copy of the keys.

use k8s_openapi::api::core::v1::Pod;

/// `ConfigSourceAnnotationKey`: `file`, `http` or `api`.
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// `ConfigMirrorAnnotationKey` (`v1.MirrorPodAnnotationKey`): the static pod's hash.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `ConfigHashAnnotationKey`: the static pod's content hash, which is also its UID.
pub const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// `ConfigFirstSeenAnnotationKey`: when the kubelet first saw the pod.
pub const SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// `FileSource`: a pod from `staticPodPath`.
pub const FILE_SOURCE: &str = "file";
/// `HTTPSource`: a pod from `staticPodURL`.
pub const HTTP_SOURCE: &str = "http";
/// `ApiserverSource`.
pub const API_SOURCE: &str = "api";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `IsStaticPod`: the source annotation is there and is not `api`.
pub fn is_static_pod(pod: &Pod) -> bool {
    annotation(pod, SOURCE_ANNOTATION).is_some_and(|source| source != API_SOURCE)
}

/// `IsMirrorPod`: the mirror annotation is there.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    mirror_hash(pod).is_some()
}

/// The hash of the static pod a mirror pod stands for.
pub fn mirror_hash(pod: &Pod) -> Option<&str> {
    annotation(pod, MIRROR_ANNOTATION)
}

/// A static pod's `config.hash`.
pub fn static_hash(pod: &Pod) -> Option<&str> {
    annotation(pod, HASH_ANNOTATION)
}

/// `TranslatePodUID` for a pod the API serves: a mirror pod stands for the static pod whose
/// UID is its hash (a static pod's UID is its hash); any other pod for itself.
pub fn translated_uid(api_pod: &Pod) -> Option<&str> {
    mirror_hash(api_pod).or(api_pod.metadata.uid.as_deref())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": "api-uid", "annotations": annotations}}))
            .unwrap()
    }

    #[test]
    fn a_pod_is_static_by_a_source_other_than_the_api_and_a_mirror_by_its_annotation() {
        assert!(is_static_pod(&pod(json!({SOURCE_ANNOTATION: "file"}))));
        assert!(is_static_pod(&pod(json!({SOURCE_ANNOTATION: "http"}))));
        assert!(!is_static_pod(&pod(json!({SOURCE_ANNOTATION: "api"}))));
        assert!(!is_static_pod(&pod(json!({}))));
        assert!(is_mirror_pod(&pod(json!({MIRROR_ANNOTATION: "h"}))));
        assert!(!is_mirror_pod(&pod(json!({HASH_ANNOTATION: "h"}))));
    }

    #[test]
    fn a_mirror_pod_translates_to_the_static_uid_its_hash_names() {
        assert_eq!(
            translated_uid(&pod(json!({MIRROR_ANNOTATION: "static-uid"}))),
            Some("static-uid")
        );
        assert_eq!(translated_uid(&pod(json!({}))), Some("api-uid"));
    }
}
