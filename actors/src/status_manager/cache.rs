//! The versioned pod-status cache (§7.1, §7.3): per pod UID the latest status nodepulse decided,
//! a version that grows with every accepted change, and the version last sent to the API. An
//! update is rejected if it revives a terminated container, ignored if nothing the kubelet owns
//! changed, and otherwise normalised, versioned and stored. Pure: time is an argument.

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{ContainerStatus, Pod, PodStatus},
    apimachinery::pkg::apis::meta::v1::Time,
};

use super::{
    conditions::{carry_transition_times, comparable, is_kubelet_owned, is_shared},
    generation::keep_the_newest,
    held_status::HeldStatus,
};
use crate::{kept_pod::KeptPod, shrink::map_after_removal};

/// One pod's cached status.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedStatus {
    pub version: u64,
    pub name: String,
    pub namespace: String,
    /// When the oldest change not yet sent was recorded.
    pub pending_since: Option<Timestamp>,
    /// Produced by the final termination step: the pod may be deleted once the API agrees.
    pub finished: bool,
    pub status: HeldStatus,
    /// The API's pod this version was last found to agree with (nothing to reconcile): the
    /// batch pass asks again only when the watch brings another version or this one changes,
    /// so a settled pod is not decoded every pass.
    pub agrees_with: Option<KeptPod>,
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    Stored { version: u64 },
    Unchanged,
    Rejected(Rejection),
}

/// Why a status was refused, as the kubelet's status manager refuses it; the same status is
/// refused again, so retrying does not help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the pod has no UID")]
    NoUid,
    #[error(
        "attempted illegal transition for container {container:?}: terminated to non-terminated with restartPolicy {restart_policy}"
    )]
    TerminatedRevived {
        container: String,
        restart_policy: String,
    },
}

#[derive(Debug, Default, Clone)]
pub struct PodStatusCache {
    statuses: HashMap<String, VersionedStatus>,
    api_versions: HashMap<String, u64>,
}

impl PodStatusCache {
    pub fn get(&self, uid: &str) -> Option<&VersionedStatus> {
        self.statuses.get(uid)
    }

    /// The internal update every entry point ends in.
    pub fn update(
        &mut self,
        pod: &Pod,
        new: PodStatus,
        force: bool,
        finished: bool,
        now: Timestamp,
    ) -> UpdateOutcome {
        let Some(uid) = pod.metadata.uid.clone() else {
            return UpdateOutcome::Rejected(Rejection::NoUid);
        };
        let now = whole_seconds(now);
        let cached = self.statuses.get(&uid);
        let old = cached
            .map(|entry| PodStatus::clone(&entry.status.get()))
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let finished = finished || cached.is_some_and(|entry| entry.finished);
        let restart_policy = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.restart_policy.clone())
            .unwrap_or_else(|| "Always".to_owned());
        if let Err(reason) = check_terminated_stay_terminated(&old, &new, &restart_policy) {
            return UpdateOutcome::Rejected(reason);
        }
        let mut new = new;
        if let Some(conditions) = new.conditions.as_mut() {
            carry_transition_times(
                old.conditions.as_deref().unwrap_or_default(),
                conditions,
                now,
            );
        }
        if new.start_time.is_none() {
            new.start_time = old.start_time.clone().or(Some(Time(now)));
        }
        keep_the_newest(&old, &mut new);
        normalize(&mut new);
        if let Some(entry) = cached
            && !force
            && same_for_the_kubelet(&entry.status.get(), &new)
        {
            return UpdateOutcome::Unchanged;
        }
        let version = cached.map_or(1, |entry| entry.version + 1);
        let pending_since = cached
            .and_then(|entry| entry.pending_since)
            .filter(|_| self.unsent(&uid))
            .or(Some(now));
        self.statuses.insert(
            uid,
            VersionedStatus {
                version,
                name: pod.metadata.name.clone().unwrap_or_default(),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                pending_since,
                finished,
                status: HeldStatus::decided(new),
                agrees_with: None,
            },
        );
        UpdateOutcome::Stored { version }
    }

    /// The watch reported `pod`: a cached status it has exactly is held as its (see
    /// [`HeldStatus`]).
    pub fn observed(&mut self, uid: &str, pod: &KeptPod) {
        if let Some(entry) = self.statuses.get_mut(uid) {
            entry.status.observed(pod);
            // An older version of the pod is not kept for the comparison's sake.
            if !entry
                .agrees_with
                .as_ref()
                .is_some_and(|agreed| agreed.ptr_eq(pod))
            {
                entry.agrees_with = None;
            }
        }
    }

    /// Whether the cached version of `uid` was found to agree with `api` already.
    pub fn agrees_with(&self, uid: &str, api: &KeptPod) -> bool {
        (self.statuses.get(uid))
            .and_then(|entry| entry.agrees_with.as_ref())
            .is_some_and(|agreed| agreed.ptr_eq(api))
    }

    /// Records that the cached version of `uid` agrees with `api` (nothing to reconcile).
    pub fn agreed(&mut self, uid: &str, api: &KeptPod) {
        if let Some(entry) = self.statuses.get_mut(uid) {
            entry.agrees_with = Some(api.clone());
        }
    }

    /// How many cached statuses are held as the watch's pods' (the debug view's figure).
    pub fn held_as_the_apis(&self) -> usize {
        self.statuses
            .values()
            .filter(|entry| entry.status.is_the_apis())
            .count()
    }

    /// Whether the cached version of `uid` has not reached the API yet.
    pub fn unsent(&self, uid: &str) -> bool {
        let sent = self.api_versions.get(uid).copied().unwrap_or(0);
        self.statuses
            .get(uid)
            .is_some_and(|entry| entry.version > sent)
    }

    /// Pods whose cached version is newer than what the API was last sent (`syncBatch(all=false)`).
    pub fn unsent_pods(&self) -> Vec<String> {
        let mut uids: Vec<String> = self
            .statuses
            .keys()
            .filter(|uid| self.unsent(uid))
            .cloned()
            .collect();
        uids.sort();
        uids
    }

    /// Records that `version` of pod `uid` reached the API. A pod forgotten meanwhile (gone
    /// while its sync ran) stays forgotten: nothing of it is recorded.
    pub fn mark_sent(&mut self, uid: &str, version: u64) {
        let Some(entry) = self.statuses.get_mut(uid) else {
            return;
        };
        if entry.version <= version {
            entry.pending_since = None;
        }
        self.api_versions.insert(uid.to_owned(), version);
    }

    /// Forces the next sync of `uid` (the API's status differs from the cache).
    pub fn forget_sent(&mut self, uid: &str) {
        self.api_versions.remove(uid);
    }

    /// Drops a pod's cached status (it was deleted or re-created), and the table space it
    /// held once most pods are gone.
    pub fn remove(&mut self, uid: &str) {
        self.statuses.remove(uid);
        self.api_versions.remove(uid);
        map_after_removal(&mut self.statuses);
        map_after_removal(&mut self.api_versions);
    }

    /// Entries and table slots both maps hold: what a deleted pod must not leave behind.
    pub fn footprint(&self) -> (usize, usize) {
        (
            self.statuses.len() + self.api_versions.len(),
            self.statuses.capacity() + self.api_versions.capacity(),
        )
    }
}

/// Terminated containers stay terminated, unless the restart policy brings them back.
fn check_terminated_stay_terminated(
    old: &PodStatus,
    new: &PodStatus,
    restart_policy: &str,
) -> Result<(), Rejection> {
    if restart_policy == "Always" {
        return Ok(());
    }
    for previous in old.container_statuses.iter().flatten() {
        let Some(terminated) = previous
            .state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
        else {
            continue;
        };
        if restart_policy == "OnFailure" && terminated.exit_code != 0 {
            continue;
        }
        let revived = new
            .container_statuses
            .iter()
            .flatten()
            .find(|status| status.name == previous.name)
            .is_some_and(|status| {
                status
                    .state
                    .as_ref()
                    .is_none_or(|state| state.terminated.is_none())
            });
        if revived {
            return Err(Rejection::TerminatedRevived {
                container: previous.name.clone(),
                restart_policy: restart_policy.to_owned(),
            });
        }
    }
    Ok(())
}

/// The API keeps RFC 3339 seconds; container statuses are kept sorted by name, with a
/// `state` and `lastState` each, as the API serves them (Go writes these structs even when
/// empty, `{}`). The cached status is then exactly the one the watch's pod has once the API
/// took it, and is held as that pod's (see [`HeldStatus`]).
fn normalize(status: &mut PodStatus) {
    let truncate = |time: &mut Option<Time>| {
        if let Some(Time(at)) = time {
            *at = whole_seconds(*at);
        }
    };
    truncate(&mut status.start_time);
    for condition in status.conditions.iter_mut().flatten() {
        truncate(&mut condition.last_probe_time);
        truncate(&mut condition.last_transition_time);
    }
    let sort = |statuses: &mut Option<Vec<ContainerStatus>>| {
        if let Some(list) = statuses {
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
    };
    sort(&mut status.container_statuses);
    sort(&mut status.ephemeral_container_statuses);
    for container in [
        &mut status.init_container_statuses,
        &mut status.container_statuses,
        &mut status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    {
        for state in [&mut container.state, &mut container.last_state] {
            let state = state.get_or_insert_default();
            if let Some(running) = state.running.as_mut() {
                truncate(&mut running.started_at);
            }
            if let Some(terminated) = state.terminated.as_mut() {
                truncate(&mut terminated.started_at);
                truncate(&mut terminated.finished_at);
            }
        }
    }
}

fn whole_seconds(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

/// Equal for the kubelet: kubelet-owned and shared conditions compared without times, others'
/// conditions ignored, everything else compared whole.
fn same_for_the_kubelet(a: &PodStatus, b: &PodStatus) -> bool {
    let ours = |status: &PodStatus| {
        let mut list: Vec<_> = status
            .conditions
            .iter()
            .flatten()
            .filter(|c| is_kubelet_owned(&c.type_) || is_shared(&c.type_))
            .map(comparable)
            .collect();
        list.sort();
        list
    };
    let rest = |status: &PodStatus| PodStatus {
        conditions: None,
        ..status.clone()
    };
    ours(a) == ours(b) && rest(a) == rest(b)
}
