//! `activeDeadlineSeconds`, as the kubelet's `activeDeadlineHandler`: a pod active on the node
//! (since its `status.startTime`) for that long ends Failed, reason `DeadlineExceeded`, its
//! containers stopped with their grace period; a Normal event says so. Each sync checks it,
//! and a pod not yet past it is synced again when it will be (a lowered deadline is an update,
//! which syncs the pod at once).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use super::engine::{Ending, Engine};
use nodepulse_actors::ports::PodEvent;

pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// When the pod's active deadline passes, if it has one.
pub fn active_deadline(pod: &Pod, start_time: Timestamp) -> Option<Timestamp> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    start_time
        .checked_add(SignedDuration::from_secs(seconds))
        .ok()
}

/// The kubelet's `pastActiveDeadline`: the deadline is reached at its very instant.
pub fn past_active_deadline(pod: &Pod, start_time: Timestamp, now: Timestamp) -> bool {
    active_deadline(pod, start_time).is_some_and(|deadline| now >= deadline)
}

impl Engine {
    /// Whether `uid` is past its active deadline; if so it is set to end Failed (the worker
    /// tears it down next), otherwise woken at the deadline.
    pub(super) fn check_active_deadline(&self, uid: &str) -> bool {
        let now = self.now();
        let mut core = self.core();
        let Some(entry) = core.pods.get_mut(uid) else {
            return false;
        };
        let Some(deadline) = active_deadline(&entry.pod, entry.start_time) else {
            return false;
        };
        if !past_active_deadline(&entry.pod, entry.start_time, now) {
            entry.retry_at = Some(entry.retry_at.map_or(deadline, |at| at.min(deadline)));
            return false;
        }
        entry.ending = Some(Ending::Failed {
            reason: DEADLINE_EXCEEDED.to_owned(),
            message: DEADLINE_EXCEEDED_MESSAGE.to_owned(),
        });
        entry.work.again();
        let pod = entry.pod.clone();
        drop(core);
        tracing::info!(pod = %super::view::pod_label(&pod), "pod past its active deadline");
        self.event(
            &pod,
            PodEvent::normal(DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_MESSAGE.to_owned()),
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(deadline: Option<i64>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "spec": {"activeDeadlineSeconds": deadline, "containers": []},
        }))
        .expect("a pod")
    }

    #[test]
    fn a_pod_is_past_its_deadline_from_the_instant_it_is_reached() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let at = |seconds: i64| {
            start
                .checked_add(SignedDuration::from_secs(seconds))
                .expect("time")
        };
        assert!(!past_active_deadline(&pod(Some(5)), start, at(4)));
        assert!(past_active_deadline(&pod(Some(5)), start, at(5)));
        assert!(past_active_deadline(&pod(Some(5)), start, at(3600)));
        assert!(!past_active_deadline(&pod(None), start, at(3600)));
        assert_eq!(active_deadline(&pod(Some(30)), start), Some(at(30)));
    }
}
