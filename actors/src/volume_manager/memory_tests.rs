//! The desired state's cache: the same state while nothing changed, built again when a pod, a
//! claim, the listing or the node did.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::volume_manager::{
    ClaimError, ClaimReason,
    fixtures::{pod, pod_with_cfg_and_cache},
};

fn memory_with(pods: &[Pod]) -> VolumeManagerMemory {
    let mut memory = VolumeManagerMemory {
        listed: true,
        ..Default::default()
    };
    for pod in pods {
        let uid = pod.metadata.uid.clone().expect("uid");
        memory.pods.insert(uid, KeptPod::from(pod.clone()));
    }
    memory
}

#[test]
fn a_pass_with_nothing_changed_reuses_the_desired_state_it_built() {
    let pods = [
        pod_with_cfg_and_cache("u1", "n1"),
        pod_with_cfg_and_cache("u2", "n1"),
    ];
    let mut memory = memory_with(&pods);
    let first = memory.desired("n1");
    assert_eq!(*first, DesiredState::from_pods(&pods, "n1"));
    assert!(Arc::ptr_eq(&first, &memory.desired("n1")));
}

#[test]
fn a_changed_pod_added_or_removed_pod_listing_or_node_builds_it_again() {
    let mut memory = memory_with(&[pod_with_cfg_and_cache("u1", "n1")]);
    assert!(!memory.desired("n1").wants("u1", "extra"));
    // The watch reports the pod again (a new `Arc`), with one more volume.
    let changed = pod(
        "u1",
        "n1",
        json!([{"name": "cfg", "configMap": {"name": "app"}}, {"name": "extra", "emptyDir": {}}]),
    );
    memory.pods.insert("u1".into(), KeptPod::from(changed));
    assert!(memory.desired("n1").wants("u1", "extra"));

    memory.pods.insert(
        "u2".into(),
        KeptPod::from(pod_with_cfg_and_cache("u2", "n1")),
    );
    assert!(memory.desired("n1").wants("u2", "cfg"));
    memory.pods.remove("u1");
    assert!(!memory.desired("n1").pods.contains_key("u1"));

    memory.listed = false;
    assert!(!memory.desired("n1").populated);
    assert!(memory.desired("n2").pods.is_empty());
    assert!(memory.desired("n1").wants("u2", "cfg"));
}

#[test]
fn a_claim_resolved_since_builds_it_again() {
    let mut memory = memory_with(&[pod(
        "u1",
        "n1",
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
    )]);
    let waiting = memory.desired("n1");
    assert_eq!(waiting.pods["u1"].unresolved, ["data"]);
    let error = ClaimError::Claim {
        namespace: "default".into(),
        claim: "data".into(),
        reason: Box::new(ClaimReason::FetchClaim("refused".into())),
    };
    memory
        .claims
        .insert(("u1".into(), "data".into()), Err(error));
    let failed = memory.desired("n1");
    assert!(failed.pods["u1"].unresolved.is_empty(), "{failed:?}");
    assert_eq!(failed.pods["u1"].errors.len(), 1, "{failed:?}");
}

#[test]
fn a_rebuild_takes_over_the_entries_of_the_pods_that_did_not_change() {
    let mut memory = memory_with(&[
        pod_with_cfg_and_cache("u1", "n1"),
        pod_with_cfg_and_cache("u2", "n1"),
    ]);
    let before = memory.desired("n1");
    // u2 is reported again (a new `Arc`, the same spec) and u3 arrives.
    memory.pods.insert(
        "u2".into(),
        KeptPod::from(pod_with_cfg_and_cache("u2", "n1")),
    );
    memory.pods.insert(
        "u3".into(),
        KeptPod::from(pod_with_cfg_and_cache("u3", "n1")),
    );
    let after = memory.desired("n1");
    assert!(
        Arc::ptr_eq(&before.pods["u1"], &after.pods["u1"]),
        "u1 taken over"
    );
    assert!(
        !Arc::ptr_eq(&before.pods["u2"], &after.pods["u2"]),
        "u2 built again"
    );
    let pods: Vec<Pod> = memory
        .pods
        .values()
        .map(|pod| Pod::clone(&pod.pod()))
        .collect();
    assert_eq!(*after, DesiredState::from_pods(&pods, "n1"));

    // Another node builds every entry again (a resolved claim: see the test above).
    let elsewhere = memory.desired("n2");
    assert!(elsewhere.pods.is_empty());
    let back = memory.desired("n1");
    assert!(
        !Arc::ptr_eq(&after.pods["u1"], &back.pods["u1"]),
        "built for n1 again"
    );
    assert_eq!(*back, *after);
}
