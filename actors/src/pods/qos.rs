//! A pod's QoS class as the kubelet reads it (`qos.GetPodQOS`): the class the API server
//! persisted in `status.qosClass`, which never changes, else kube-apiserver's computation
//! (`nodepulse_validation::qos`) of the spec.

use k8s_openapi::api::core::v1::Pod;
use nodepulse_validation::qos::{BEST_EFFORT, BURSTABLE, GUARANTEED, compute_qos_class};

/// `qos.GetPodQOS`: the persisted class, else the computed one. The kubelet reads the
/// persisted one so that it and the API server never disagree: the API server refuses a status
/// whose class differs (`status.qosClass: field is immutable`).
pub fn qos_class(pod: &Pod) -> &'static str {
    match pod.status.as_ref().and_then(|s| s.qos_class.as_deref()) {
        Some(GUARANTEED) => GUARANTEED,
        Some(BURSTABLE) => BURSTABLE,
        Some(BEST_EFFORT) => BEST_EFFORT,
        _ => pod.spec.as_ref().map_or(BEST_EFFORT, |spec| {
            serde_json::to_value(spec).map_or(BEST_EFFORT, |spec| compute_qos_class(&spec))
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_class_the_api_server_persisted_wins_over_the_computed_one() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"resources": {"requests": {"cpu": "1"}},
                     "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap();
        assert_eq!(qos_class(&pod), BURSTABLE, "pod-level requests count");
        pod.status = Some(serde_json::from_value(json!({"qosClass": "Guaranteed"})).unwrap());
        assert_eq!(qos_class(&pod), GUARANTEED);
    }
}
