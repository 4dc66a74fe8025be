//! A pod's JSON as it is kept: LZ4-compressed against a dictionary of what every pod carries.
//! Most of a pod's JSON is what the API server's defaulting and admission wrote into it (the
//! service-account token volume, the two tolerations, `terminationMessagePath`, the scheduler's
//! name, five conditions with their timestamps) and the field names; a pod compressed alone
//! finds few repeats in its own 2 KiB, but against [`dictionary.json`](dictionary.json) (two
//! pods: a bare one and a Deployment's, each written as [`pack`] writes a pod) it keeps little
//! more than its names, uid, times and addresses. The bench's pod, 2,389 bytes as JSON, packs
//! into about 250. LZ4, because a read of a cooled pod unpacks it: a few microseconds, beside
//! the tens the decode takes.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Pod;

/// The dictionary's pods, as readable JSON; [`dictionary`] writes them as [`pack`] would, so
/// that their bytes match a packed pod's field for field.
const DICTIONARY_PODS: &str = include_str!("dictionary.json");

/// The bytes every pod is compressed against.
fn dictionary() -> &'static [u8] {
    static BYTES: OnceLock<Box<[u8]>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let pods: Vec<Pod> =
            serde_json::from_str(DICTIONARY_PODS).expect("the packing dictionary's pods decode");
        let mut bytes = Vec::new();
        for pod in &pods {
            serde_json::to_writer(&mut bytes, pod).expect("a decoded pod writes as JSON");
        }
        bytes.into_boxed_slice()
    })
}

/// `pod` as its JSON, compressed (the JSON's length first).
pub fn pack(pod: &Pod) -> serde_json::Result<Box<[u8]>> {
    let json = serde_json::to_vec(pod)?;
    Ok(lz4_flex::block::compress_prepend_size_with_dict(&json, dictionary()).into_boxed_slice())
}

/// The pod [`pack`] packed.
///
/// # Panics
/// If `packed` is not what `pack` wrote: only `KeptPod` calls it, on its own bytes.
pub fn unpack(packed: &[u8]) -> Pod {
    let json = lz4_flex::block::decompress_size_prepended_with_dict(packed, dictionary())
        .unwrap_or_else(|error| panic!("a kept pod's packed JSON does not unpack: {error}"));
    serde_json::from_slice(&json)
        .unwrap_or_else(|error| panic!("a kept pod's own JSON does not decode: {error}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The bench's pod (`nodepulse-bench pods`) as the emulator returns it once Running.
    fn bench_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"creationTimestamp": "2026-12-05T10:31:41Z", "generation": 1,
                         "labels": {"bench": "pods"}, "name": "bench-pod-0", "namespace": "default",
                         "resourceVersion": "13571", "uid": "af8aba74-8e00-48dc-9a32-54e356ab770a"},
            "spec": {"containers": [{"image": "pause", "imagePullPolicy": "Always", "name": "app",
                                     "resources": {}, "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File",
                                     "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                                       "name": "kube-api-access-s4mdn", "readOnly": true}]}],
                     "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "nodeName": "pods-0",
                     "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
                     "schedulerName": "default-scheduler", "securityContext": {}, "serviceAccount": "default",
                     "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                     "tolerations": [
                         {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                         {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}],
                     "volumes": [{"name": "kube-api-access-s4mdn", "projected": {"defaultMode": 420, "sources": [
                         {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                         {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                         {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                                     "path": "namespace"}]}}]}}]},
            "status": {"conditions": [
                           {"lastTransitionTime": "2026-12-05T10:31:41Z", "status": "True", "type": "PodReadyToStartContainers"},
                           {"lastTransitionTime": "2026-12-05T10:31:41Z", "status": "True", "type": "Initialized"},
                           {"lastTransitionTime": "2026-12-05T10:31:41Z", "status": "True", "type": "Ready"},
                           {"lastTransitionTime": "2026-12-05T10:31:41Z", "status": "True", "type": "ContainersReady"},
                           {"lastTransitionTime": "2026-12-05T10:31:41Z", "status": "True", "type": "PodScheduled"}],
                       "containerStatuses": [{"containerID": "simulated://af8aba74-8e00-48dc-9a32-54e356ab770a-app",
                                              "image": "pause", "imageID": "", "lastState": {}, "name": "app",
                                              "ready": true, "restartCount": 0, "started": true,
                                              "state": {"running": {"startedAt": "2026-12-05T10:31:41Z"}}}],
                       "hostIP": "192.0.2.2", "hostIPs": [{"ip": "192.0.2.2"}], "phase": "Running",
                       "podIP": "10.88.0.2", "podIPs": [{"ip": "10.88.0.2"}], "qosClass": "BestEffort",
                       "startTime": "2026-12-05T10:31:41Z"},
        }))
        .expect("a pod")
    }

    #[test]
    fn a_pod_reads_back_as_it_was_packed_and_a_defaulted_one_packs_small() {
        let pod = bench_pod();
        let json = serde_json::to_vec(&pod).expect("JSON");
        let packed = pack(&pod).expect("packed");
        assert_eq!(unpack(&packed), pod);
        assert!(
            packed.len() * 5 < json.len(),
            "{} bytes of JSON packed into {}",
            json.len(),
            packed.len()
        );
    }

    /// A pod that shares little with the dictionary (a 4 KiB annotation of noise, non-ASCII
    /// names) still reads back whole.
    #[test]
    fn a_pod_unlike_the_dictionary_reads_back_whole() {
        let noise: String = (0..4096u32)
            .map(|i| char::from(b'!' + (i.wrapping_mul(2_654_435_761) >> 27) as u8))
            .collect();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "odd", "annotations": {"blob": noise}},
            "spec": {"containers": [{"name": "ünïcode", "image": "x"}]},
        }))
        .expect("a pod");
        let packed = pack(&pod).expect("packed");
        assert_eq!(unpack(&packed), pod);
    }

    #[test]
    fn the_dictionarys_pods_decode() {
        assert!(dictionary().len() > 3000, "both pods written");
    }
}
