//! Eviction ranking and the chosen eviction's message, as the kubelet's `rankMemoryPressure`,
//! `rankDiskPressureFunc` and `rankPIDPressure` order pods.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{
    ranking::{Resource, choose_eviction, is_critical, rank, threshold_to_reclaim},
    signals::{Observation, Signal},
    thresholds::{Threshold, ThresholdValue},
};
use crate::ports::{ContainerStats, PodStats};

const MI: u64 = 1 << 20;

fn pod(name: &str, memory_request: Option<&str>, priority: Option<i32>) -> Pod {
    let resources = memory_request.map_or(json!({}), |r| json!({"requests": {"memory": r}}));
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"priority": priority, "containers": [{"name": "app", "resources": resources}]},
    }))
    .expect("a pod")
}

fn stats(pod: Pod, memory: Option<u64>) -> PodStats {
    PodStats {
        pod: Arc::new(pod),
        containers: memory.map(|memory_bytes| {
            vec![ContainerStats {
                name: "app".into(),
                memory_bytes,
                ephemeral_storage_bytes: 0,
            }]
        }),
        processes: Some(1),
        storage: None,
    }
}

fn names(pods: &[PodStats]) -> Vec<String> {
    pods.iter()
        .map(|p| p.pod.metadata.name.clone().unwrap())
        .collect()
}

fn threshold(signal: Signal, value: ThresholdValue) -> Threshold {
    Threshold {
        signal,
        value,
        text: "100Mi".into(),
        grace_period: Duration::ZERO,
        hard: true,
        min_reclaim: None,
    }
}

#[test]
fn memory_ranks_over_request_first_then_priority_then_use_above_request() {
    let pods = vec![
        stats(pod("under-request", Some("500Mi"), None), Some(100 * MI)),
        stats(pod("over-by-100", Some("100Mi"), None), Some(200 * MI)),
        stats(pod("over-by-300", Some("100Mi"), None), Some(400 * MI)),
        stats(
            pod("over-high-priority", Some("100Mi"), Some(1000)),
            Some(900 * MI),
        ),
        stats(pod("best-effort", None, None), Some(150 * MI)),
        stats(pod("no-stats", Some("1Gi"), Some(5000)), None),
    ];
    assert_eq!(
        names(&rank(pods, Resource::Memory)),
        [
            "no-stats",
            "over-by-300",
            "best-effort",
            "over-by-100",
            "over-high-priority",
            "under-request"
        ]
    );
}

#[test]
fn pids_rank_by_priority_then_process_count() {
    let mut few = stats(pod("few", None, None), Some(0));
    few.processes = Some(3);
    let mut many = stats(pod("many", None, None), Some(0));
    many.processes = Some(300);
    let mut important = stats(pod("important", None, Some(10)), Some(0));
    important.processes = Some(3000);
    assert_eq!(
        names(&rank(vec![few, important, many], Resource::Pids)),
        ["many", "few", "important"]
    );
}

#[test]
fn critical_pods_are_never_chosen() {
    let mut mirror = pod("mirror", None, None);
    mirror.metadata.annotations = Some(BTreeMap::from([(
        "kubernetes.io/config.mirror".to_owned(),
        "abc".to_owned(),
    )]));
    let mut by_class = pod("by-class", None, None);
    by_class.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
    assert!(is_critical(&mirror));
    assert!(is_critical(&by_class));
    assert!(is_critical(&pod("by-priority", None, Some(2_000_000_000))));
    assert!(!is_critical(&pod("ordinary", None, Some(1_000_000))));

    let threshold = threshold(Signal::MemoryAvailable, ThresholdValue::Quantity(100 * MI));
    let only_critical = vec![
        stats(by_class, Some(900 * MI)),
        stats(mirror, Some(900 * MI)),
    ];
    assert_eq!(
        choose_eviction(&threshold, &BTreeMap::new(), only_critical),
        None
    );
}

#[test]
fn the_eviction_message_names_the_resource_threshold_and_offending_containers() {
    let threshold = threshold(Signal::MemoryAvailable, ThresholdValue::Quantity(100 * MI));
    let observations = BTreeMap::from([(
        Signal::MemoryAvailable,
        Observation {
            available: 50 * MI,
            capacity: 1024 * MI,
        },
    )]);
    let pods = vec![
        stats(pod("calm", Some("500Mi"), None), Some(100 * MI)),
        stats(pod("hog", Some("100Mi"), None), Some(300 * MI)),
    ];
    let eviction = choose_eviction(&threshold, &observations, pods).expect("an eviction");
    assert_eq!(eviction.pod.metadata.name.as_deref(), Some("hog"));
    assert_eq!(
        eviction.message,
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
         Container app was using 300Mi, which exceeds its request of 100Mi. "
    );
    assert_eq!(eviction.annotations["offending_containers"], "app");
    assert_eq!(eviction.annotations["offending_containers_usage"], "300Mi");
    assert_eq!(eviction.annotations["starved_resource"], "memory");
}

#[test]
fn memory_thresholds_are_reclaimed_before_disk_ones() {
    let thresholds = vec![
        threshold(Signal::NodefsAvailable, ThresholdValue::Percentage(10.0)),
        threshold(Signal::PidAvailable, ThresholdValue::Quantity(100)),
        threshold(Signal::MemoryAvailable, ThresholdValue::Quantity(100 * MI)),
    ];
    let chosen = threshold_to_reclaim(&thresholds, [0, 1, 2]).expect("one");
    assert_eq!(chosen.signal, Signal::MemoryAvailable);
    let chosen = threshold_to_reclaim(&thresholds, [1, 0]).expect("one");
    assert_eq!(
        chosen.signal,
        Signal::PidAvailable,
        "the first eligible otherwise"
    );
    assert!(threshold_to_reclaim(&thresholds, []).is_none());
}
