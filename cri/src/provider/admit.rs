//! Admission before anything runs, as the kubelet's `canAdmitPod`: a pod not yet admitted is
//! checked by `pods::sysctls`, `pods::admission` (against the Node NodeStatusActor shares and
//! the pods already admitted), `pods::apparmor` and `pods::pod_fields`; a refused one ends Failed with the
//! kubelet's status and Warning event, and never reaches the runtime. Checked under the engine's lock, so two pods never admit in parallel.

use std::{sync::Arc, time::Duration};

use super::{
    backoff::later,
    engine::{Ending, Engine},
    sent_status::SentStatus,
};
use nodepulse_actors::{
    config_source::is_static_pod,
    pods::{
        PodUpdate,
        admission::{admit, rejected_status, rejection_event},
        apparmor, pod_fields,
    },
};

/// How soon a pod waiting for the Node to be known is looked at again.
const NODE_UNKNOWN_RETRY: Duration = Duration::from_secs(1);

impl Engine {
    /// Whether `uid` may run; a refusal is reported, and the pod is finished.
    pub(super) fn admit(&self, uid: &str) -> bool {
        let Some(view) = &self.node else {
            return true;
        };
        let now = self.now();
        let mut core = self.core();
        let admitted: Vec<_> = core
            .pods
            .iter()
            // A pod gone from its source no longer counts (the kubelet's pod manager dropped
            // it), even while it is torn down: an edited static pod's successor is admitted
            // beside it, and waits for its turn (`static_turn`).
            .filter(|(other, entry)| {
                other.as_str() != uid
                    && entry.admitted
                    && !entry.end.is_finished()
                    && entry.ending != Some(Ending::Gone)
            })
            .map(|(_, entry)| Arc::clone(&entry.pod))
            .collect();
        let Some(entry) = core.pods.get_mut(uid) else {
            return false;
        };
        if entry.admitted {
            return true;
        }
        // A static pod needs no API server: the locally built Node until there is one (the
        // kubelet's `getNodeAnyWay`). A pod of the API waits for the API's Node, as the
        // kubelet's API source starts only once the Node's informer synced.
        let node = if is_static_pod(&entry.pod) {
            view.get_any_way()
        } else {
            view.get()
        };
        let Some(node) = node else {
            entry.retry_at = Some(later(now, NODE_UNKNOWN_RETRY));
            return false;
        };
        // The kubelet's handlers in its order: sysctls, the predicates, then AppArmor.
        let verdict = nodepulse_actors::pods::sysctls::admit(
            &entry.pod,
            &self.settings.allowed_unsafe_sysctls,
        )
        .and_then(|()| admit(&entry.pod, &node, &admitted))
        .and_then(|()| apparmor::admit(&entry.pod, &self.settings.apparmor))
        .and_then(|()| pod_fields::admit(&entry.pod));
        let Err(rejection) = verdict else {
            entry.admitted = true;
            return true;
        };
        tracing::info!(pod = %super::view::pod_label(&entry.pod), %rejection, "pod rejected by admission");
        let status = rejected_status(&entry.pod, &rejection);
        // Never ran, so never told: TerminatePod follows the status below.
        entry.end.finish();
        entry.last_sent = Some(SentStatus::of(&status));
        let (pod, decoded) = (entry.kept.clone(), Arc::clone(&entry.pod));
        core.outbox.extend([
            PodUpdate::Status {
                pod: pod.clone(),
                status: Box::new(status),
            },
            PodUpdate::Event {
                pod: decoded,
                event: rejection_event(&rejection),
            },
            PodUpdate::Terminated { pod },
        ]);
        drop(core);
        self.wake();
        false
    }
}
