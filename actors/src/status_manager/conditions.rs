//! Who owns which pod condition (§7.4): the kubelet writes its own, shares DisruptionTarget, and
//! leaves everything else (readiness gates, custom conditions) to their owners.

use jiff::Timestamp;
use k8s_openapi::{api::core::v1::PodCondition, apimachinery::pkg::apis::meta::v1::Time};

/// Conditions the kubelet (and so nodepulse) owns.
pub const KUBELET_OWNED: [&str; 7] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodResizeInProgress",
    "PodResizePending",
    "PodReadyToStartContainers",
];

/// Written by the kubelet and by others.
pub const SHARED: [&str; 1] = ["DisruptionTarget"];

pub fn is_kubelet_owned(kind: &str) -> bool {
    KUBELET_OWNED.contains(&kind)
}

pub fn is_shared(kind: &str) -> bool {
    SHARED.contains(&kind)
}

/// Conditions whose `lastTransitionTime` the status manager keeps when their status did not
/// change, and sets to now when it did.
const TRANSITION_TRACKED: [&str; 6] = [
    "ContainersReady",
    "Ready",
    "Initialized",
    "PodReadyToStartContainers",
    "PodScheduled",
    "DisruptionTarget",
];

/// Applies the transition-time rule to `new` against `old`.
pub fn carry_transition_times(old: &[PodCondition], new: &mut [PodCondition], now: Timestamp) {
    for condition in new
        .iter_mut()
        .filter(|c| TRANSITION_TRACKED.contains(&c.type_.as_str()))
    {
        let previous = old.iter().find(|o| o.type_ == condition.type_);
        condition.last_transition_time = match previous {
            Some(previous) if previous.status == condition.status => {
                previous.last_transition_time.clone()
            }
            _ => Some(Time(now)),
        };
    }
}

/// The part of a condition compared for "did the status change": no timestamps.
pub fn comparable(condition: &PodCondition) -> (String, String, Option<String>, Option<String>) {
    (
        condition.type_.clone(),
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    )
}
