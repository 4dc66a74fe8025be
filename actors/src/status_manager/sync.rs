//! One pod's sync with the API server (§7.5 `syncPod`), as an owned future the actor spawns:
//! a live GET; a pod re-created under the same name drops the cached status; otherwise the
//! merged status is PATCHed with the UID precondition (nothing is sent when the API already
//! has it), and a finished pod that is being deleted and is terminal in the API is deleted
//! with `gracePeriodSeconds: 0` and `preconditions.uid`.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::{
    merge::{is_terminal, merge_pod_status},
    patch::pod_status_patch,
};
use crate::ports::{ApiError, PodApi};

/// The annotation that marks a mirror pod (a static pod's API copy): never deleted here.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// One cached status to sync, owned so the future can carry it.
#[derive(Debug, Clone)]
pub struct PodSyncJob {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub version: u64,
    pub finished: bool,
    pub status: PodStatus,
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
    let mirror = api_pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(MIRROR_ANNOTATION));
    finished
        && !mirror
        && api_pod.metadata.deletion_timestamp.is_some()
        && is_terminal(
            api_pod
                .status
                .as_ref()
                .and_then(|status| status.phase.as_deref()),
        )
}

/// Syncs one pod. `current` says whether this instance is still the one in charge; it is
/// asked before every write, so an instance that hung and was replaced sends nothing stale.
pub async fn sync_pod(
    api: Arc<dyn PodApi>,
    job: PodSyncJob,
    current: impl Fn() -> bool,
    now: Timestamp,
) -> PodSyncOutcome {
    let pod = match api.get_pod(&job.namespace, &job.name).await {
        Ok(pod) => pod,
        Err(ApiError::NotFound(_)) => return PodSyncOutcome::NotFound,
        Err(error) => return PodSyncOutcome::Failed(PodSyncError::GetPod(error)),
    };
    let api_uid = pod.metadata.uid.clone().unwrap_or_default();
    if api_uid != job.uid {
        return PodSyncOutcome::Recreated { api_uid };
    }
    let api_status = pod.status.clone().unwrap_or_default();
    let merged = merge_pod_status(
        &api_status,
        &job.status,
        could_have_running_containers(&job.status),
        now,
    );
    let mut latest = pod;
    let patched = match pod_status_patch(&job.uid, &api_status, &merged) {
        None => false,
        Some(patch) => {
            if !current() {
                return PodSyncOutcome::Superseded;
            }
            match api.patch_pod_status(&job.namespace, &job.name, patch).await {
                Ok(pod) => latest = pod,
                Err(ApiError::NotFound(_)) => return PodSyncOutcome::NotFound,
                Err(error) => return PodSyncOutcome::Failed(PodSyncError::PatchStatus(error)),
            }
            true
        }
    };
    let mut deleted = false;
    if can_be_deleted(&latest, job.finished) {
        if !current() {
            return PodSyncOutcome::Superseded;
        }
        match api.delete_pod(&job.namespace, &job.name, &job.uid).await {
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
