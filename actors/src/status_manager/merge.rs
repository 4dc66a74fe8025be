//! `mergePodStatus` (§7.6): what is sent is the API's status with the kubelet's parts replaced —
//! others' conditions kept, kubelet-owned ones taken from the cache, DisruptionTarget only when
//! the pod is becoming terminal and can no longer run containers, a terminal phase held back
//! while containers may still run, and Ready/ContainersReady forced False once terminal.

use jiff::Timestamp;
use k8s_openapi::{api::core::v1::PodStatus, apimachinery::pkg::apis::meta::v1::Time};

use super::conditions::{is_kubelet_owned, is_shared};

pub fn is_terminal(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded" | "Failed"))
}

pub fn merge_pod_status(
    api: &PodStatus,
    cached: &PodStatus,
    could_have_running_containers: bool,
    now: Timestamp,
) -> PodStatus {
    let mut merged = cached.clone();
    let becoming_terminal =
        is_terminal(cached.phase.as_deref()) && !is_terminal(api.phase.as_deref());
    let send_disruption = becoming_terminal && !could_have_running_containers;

    // The API's conditions that the cached status replaces.
    let replaced = |kind: &str| is_kubelet_owned(kind) || (send_disruption && is_shared(kind));
    let mut conditions: Vec<_> = api
        .conditions
        .iter()
        .flatten()
        .filter(|c| !replaced(&c.type_))
        .cloned()
        .collect();
    for condition in cached.conditions.iter().flatten() {
        if is_kubelet_owned(&condition.type_) {
            conditions.push(condition.clone());
        } else if send_disruption && is_shared(&condition.type_) {
            let mut refreshed = condition.clone();
            refreshed.last_transition_time = Some(Time(now));
            conditions.push(refreshed);
        }
    }
    merged.conditions = (!conditions.is_empty()).then_some(conditions);
    merged.resource_claim_statuses = api.resource_claim_statuses.clone();

    if becoming_terminal && could_have_running_containers {
        merged.phase = api.phase.clone();
        merged.reason = api.reason.clone();
        merged.message = api.message.clone();
    }
    if is_terminal(merged.phase.as_deref()) {
        for condition in merged.conditions.iter_mut().flatten() {
            if matches!(condition.type_.as_str(), "Ready" | "ContainersReady")
                && condition.status != "False"
            {
                condition.status = "False".to_owned();
                condition.last_transition_time = Some(Time(now));
            }
        }
    }
    merged
}
