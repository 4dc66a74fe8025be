//! One pod's sync with the API server (§7.5 `syncPod`), as an owned future the actor spawns:
//! a live GET; a pod re-created under the same name drops the cached status; otherwise the
//! merged status is PATCHed with the UID precondition (nothing is sent when the API already
//! has it), and a finished pod that is being deleted and is terminal in the API is deleted
//! with `gracePeriodSeconds: 0` and `preconditions.uid`. A static pod's status goes to its
//! mirror pod, as the kubelet's `TranslatePodUID` does: the pod of that name is its mirror when
//! the mirror's hash is the static UID, and is PATCHed under the mirror's own UID.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::{
    held_status::HeldStatus,
    merge::{is_terminal, merge_pod_status},
    patch::pod_status_patch,
};
use crate::{
    config_source::{is_mirror_pod, mirror_hash, translated_uid},
    ports::{ApiError, PodApi},
};

/// One cached status to sync, owned so the future can carry it.
#[derive(Debug, Clone)]
pub struct PodSyncJob {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub version: u64,
    pub finished: bool,
    /// The cache's, shared: a waiting sync holds no copy of it.
    pub status: HeldStatus,
    /// A static pod: its status is written to its mirror pod, which may not exist yet.
    pub static_pod: bool,
}

/// The API call a pod's sync failed at, with the API's error as the source. Whether trying
/// again helps is the API error's to say: the batch pass retries either way, as the kubelet's
/// status manager does, since a pod's status has no other way to reach the API.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PodSyncError {
    #[error("get pod: {0}")]
    GetPod(#[source] ApiError),
    #[error("patch pod status: {0}")]
    PatchStatus(#[source] ApiError),
    #[error("delete pod: {0}")]
    DeletePod(#[source] ApiError),
}

impl PodSyncError {
    /// Whether the same call, made again, can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::GetPod(error) | Self::PatchStatus(error) | Self::DeletePod(error) => {
                error.is_retryable()
            }
        }
    }
}

/// How one pod's sync ended.
#[derive(Debug, Clone)]
pub enum PodSyncOutcome {
    /// The API has this version now; `patched` says whether a PATCH was needed and `deleted`
    /// whether the pod was then deleted.
    Synced {
        version: u64,
        patched: bool,
        deleted: bool,
    },
    /// No pod of that name: nothing to write to.
    NotFound,
    /// A static pod whose mirror pod is not there (yet), or is another version's: the status
    /// waits for it.
    NoMirror,
    /// The pod of that name has another UID: the cached status belongs to a pod that is gone.
    Recreated {
        api_uid: String,
    },
    /// This instance was superseded (a newer one runs) before the write: nothing was sent.
    Superseded,
    Failed(PodSyncError),
}

/// Whether the cached status shows a container that may still be running.
pub fn could_have_running_containers(status: &PodStatus) -> bool {
    [
        &status.init_container_statuses,
        &status.container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .any(|container| {
        container
            .state
            .as_ref()
            .is_some_and(|state| state.running.is_some())
    })
}

/// `canBeDeleted`: being deleted, not a mirror pod, terminal in the API, and the cached
/// status came from the final termination step.
pub fn can_be_deleted(api_pod: &Pod, finished: bool) -> bool {
    finished
        && !is_mirror_pod(api_pod)
        && api_pod.metadata.deletion_timestamp.is_some()
        && is_terminal(
            api_pod
                .status
                .as_ref()
                .and_then(|status| status.phase.as_deref()),
        )
}

/// What a live GET of the pod decided, before any write.
enum Decision {
    /// The sync ends here, with nothing sent.
    Done(PodSyncOutcome),
    Write {
        /// The UID writes are made under: the mirror pod's for a static pod.
        api_uid: String,
        /// The status PATCH, when the API's status is not already the merged one.
        patch: Option<serde_json::Value>,
        /// Whether the pod, as the GET found it, may be deleted (`canBeDeleted`).
        deletable: bool,
    },
}

/// Reads the GET's pod against the job: whether it is still this pod, what to PATCH, and
/// whether it may be deleted. Synchronous, so that neither pod nor status is held across the
/// requests that follow: a sync waiting for its turn costs its job, not copies of the pod.
fn decide(pod: &Pod, job: &PodSyncJob, now: Timestamp) -> Decision {
    // The mirror of another version of the manifest is about to be replaced: the status waits
    // for this version's (the kubelet matches mirrors by full name; the hash keeps an old
    // version's status off the new mirror).
    if job.static_pod && is_mirror_pod(pod) && mirror_hash(pod) != Some(job.uid.as_str()) {
        return Decision::Done(PodSyncOutcome::NoMirror);
    }
    if translated_uid(pod) != Some(job.uid.as_str()) {
        let api_uid = pod.metadata.uid.clone().unwrap_or_default();
        return Decision::Done(PodSyncOutcome::Recreated { api_uid });
    }
    // The mirror pod's UID for a static pod; the pod's own otherwise.
    let api_uid = pod.metadata.uid.clone().unwrap_or_default();
    let none = PodStatus::default();
    let api_status = pod.status.as_ref().unwrap_or(&none);
    let cached = job.status.get();
    let merged = merge_pod_status(
        api_status,
        &cached,
        could_have_running_containers(&cached),
        now,
    );
    Decision::Write {
        patch: pod_status_patch(&api_uid, api_status, &merged),
        deletable: can_be_deleted(pod, job.finished),
        api_uid,
    }
}

/// Syncs one pod. `current` says whether this instance is still the one in charge; it is
/// asked before every write, so an instance that hung and was replaced sends nothing stale.
pub async fn sync_pod(
    api: Arc<dyn PodApi>,
    job: PodSyncJob,
    current: impl Fn() -> bool,
    now: Timestamp,
) -> PodSyncOutcome {
    let not_found = || {
        if job.static_pod {
            PodSyncOutcome::NoMirror
        } else {
            PodSyncOutcome::NotFound
        }
    };
    let decision = match api.get_pod(&job.namespace, &job.name).await {
        Ok(pod) => decide(&pod, &job, now),
        Err(ApiError::NotFound(_)) => return not_found(),
        Err(error) => return PodSyncOutcome::Failed(PodSyncError::GetPod(error)),
    };
    let (api_uid, patch, mut deletable) = match decision {
        Decision::Done(outcome) => return outcome,
        Decision::Write {
            api_uid,
            patch,
            deletable,
        } => (api_uid, patch, deletable),
    };
    let patched = patch.is_some();
    if let Some(patch) = patch {
        if !current() {
            return PodSyncOutcome::Superseded;
        }
        match api.patch_pod_status(&job.namespace, &job.name, patch).await {
            Ok(pod) => deletable = can_be_deleted(&pod, job.finished),
            Err(ApiError::NotFound(_)) => return not_found(),
            Err(error) => return PodSyncOutcome::Failed(PodSyncError::PatchStatus(error)),
        }
    }
    let mut deleted = false;
    if deletable {
        if !current() {
            return PodSyncOutcome::Superseded;
        }
        match api.delete_pod(&job.namespace, &job.name, &api_uid).await {
            Ok(()) | Err(ApiError::NotFound(_)) => deleted = true,
            Err(error) => return PodSyncOutcome::Failed(PodSyncError::DeletePod(error)),
        }
    }
    PodSyncOutcome::Synced {
        version: job.version,
        patched,
        deleted,
    }
}
