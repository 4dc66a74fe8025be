//! One instance per full name for static pods, as the kubelet's pod workers
//! (`pod_workers.go` `allowStaticPodStart`, `startedStaticPodsByFullname`,
//! `waitingToStartStaticPodsByFullname`): an edited manifest is a new pod (a new UID, the same
//! name), and it starts nothing until the old instance has fully terminated — its containers
//! stopped, its sandbox gone — so the two never hold a host port, a lock or a data directory
//! at once (an etcd or kube-apiserver upgrade). Of several waiting, the first to arrive goes.
//! Pods of the API are never held back.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::{backoff::later, engine::Engine};
use nodepulse_actors::config_source::is_static_pod;

/// How soon a waiting static pod looks again when no teardown woke it first (the kubelet's
/// `backOffPeriod`; a teardown that ends wakes the next one at once).
const TURN_RETRY: Duration = Duration::from_secs(10);

/// What the rule needs to know of a static pod of the same full name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    /// Its place in the order the pods arrived.
    pub arrival: u64,
    /// It was let start (it is the name's started instance).
    pub started: bool,
    /// Neither finished nor being torn down.
    pub live: bool,
    /// Nothing more of it runs (its teardown is over).
    pub finished: bool,
}

/// Whether the static pod that arrived `arrival`-th may start beside `others` (the other
/// static pods of its full name): no other started instance that has not finished, and no
/// live one waiting that arrived before it.
pub fn may_start(arrival: u64, others: &[Instance]) -> bool {
    others.iter().all(|other| {
        if other.started {
            other.finished
        } else {
            !other.live || other.arrival > arrival
        }
    })
}

/// The kubelet's full name, `<name>_<namespace>`.
fn full_name(pod: &Pod) -> (Option<&str>, Option<&str>) {
    (
        pod.metadata.name.as_deref(),
        pod.metadata.namespace.as_deref(),
    )
}

impl Engine {
    /// Whether `uid` may start its containers now: always for a pod of the API; for a static
    /// pod, once it is its full name's turn (then it holds the name until it finished). A pod
    /// that must wait is looked at again when the instance before it is torn down.
    pub(super) fn static_turn(&self, uid: &str) -> bool {
        let now = self.now();
        let mut core = self.core();
        let Some(entry) = core.pods.get(uid) else {
            return false;
        };
        if entry.static_started || !is_static_pod(&entry.pod) {
            return true;
        }
        let (name, arrival) = (full_name(&entry.pod), entry.arrival);
        let others: Vec<Instance> = core
            .pods
            .iter()
            .filter(|(other, e)| {
                other.as_str() != uid && is_static_pod(&e.pod) && full_name(&e.pod) == name
            })
            .map(|(_, e)| Instance {
                arrival: e.arrival,
                started: e.static_started,
                live: e.ending.is_none() && !e.end.is_finished(),
                finished: e.end.is_finished(),
            })
            .collect();
        let Some(entry) = core.pods.get_mut(uid) else {
            return false;
        };
        if may_start(arrival, &others) {
            entry.static_started = true;
            return true;
        }
        tracing::info!(
            pod = %super::view::pod_label(&entry.pod),
            "static pod waits for the pod of the same full name to terminate"
        );
        entry.retry_at = Some(later(now, TURN_RETRY));
        false
    }

    /// After `pod` was torn down: the static pods of its full name that wait are synced now.
    pub(super) fn wake_static_successors(self: &std::sync::Arc<Self>, pod: &Pod) {
        if !is_static_pod(pod) {
            return;
        }
        let waiting: Vec<String> = self
            .core()
            .pods
            .iter()
            .filter(|(_, e)| {
                !e.static_started
                    && e.ending.is_none()
                    && !e.end.is_finished()
                    && is_static_pod(&e.pod)
                    && full_name(&e.pod) == full_name(pod)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in waiting {
            self.request_sync(&uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(arrival: u64, started: bool, live: bool, finished: bool) -> Instance {
        Instance {
            arrival,
            started,
            live,
            finished,
        }
    }

    #[test]
    fn a_static_pod_starts_only_once_the_started_one_of_its_name_finished_and_in_arrival_order() {
        // (the candidate's arrival, the others, whether it may start)
        let cases = [
            (1, vec![], true),
            // The old instance is being torn down (edited manifest): wait until it finished.
            (2, vec![instance(1, true, false, false)], false),
            (2, vec![instance(1, true, false, true)], true),
            // A started instance still live (the same name from a second source).
            (2, vec![instance(1, true, true, false)], false),
            // An earlier live one waits too: it goes first.
            (3, vec![instance(2, false, true, false)], false),
            (2, vec![instance(3, false, true, false)], true),
            // An earlier one that was removed before its turn is skipped.
            (3, vec![instance(2, false, false, false)], true),
            (
                3,
                vec![
                    instance(1, true, false, true),
                    instance(2, false, false, true),
                ],
                true,
            ),
        ];
        for (arrival, others, expected) in cases {
            assert_eq!(
                may_start(arrival, &others),
                expected,
                "{arrival} beside {others:?}"
            );
        }
    }
}
