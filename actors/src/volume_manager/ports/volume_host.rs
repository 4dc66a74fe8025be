//! The node's disk as the volume manager reaches it: rebuild the actual state from
//! `<rootDir>/pods` after a restart, set a volume up (emptyDir, hostPath, or the wrapped
//! emptyDir plus atomic write of an API-backed volume), tear it down, remove a pod's directory.
//! Calls are synchronous and short (directory and small-file work); the daemon's `volume_plugins`
//! module implements it, actor tests use a fake.

use crate::volume_manager::{
    ActualState, Plugin, PodVolume,
    content::{NodeAllocatable, Payload},
};

/// Why a disk operation failed. The text is the kubelet's where it has one: it follows
/// `MountVolume.SetUp failed for volume "<name>" : ` in the pod's FailedMount event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VolumeHostError {
    pub message: String,
    /// Whether the same operation may succeed later (an I/O error, not a bad spec).
    pub retryable: bool,
}

/// What a SetUp needs besides the volume.
#[derive(Debug, Clone, Copy)]
pub struct SetUpContext<'a> {
    pub pod_uid: &'a str,
    /// The pod's memory limit in bytes, when every container has one (bounds a tmpfs).
    pub pod_memory_limit: Option<u64>,
    pub allocatable: &'a NodeAllocatable,
    /// The files of an API-backed volume; `None` for emptyDir and hostPath.
    pub content: Option<&'a Payload>,
    /// The pod's `securityContext.fsGroup`: emptyDir and API-backed volumes are given to it.
    pub fs_group: Option<u32>,
}

pub trait VolumeHost: Send + Sync + 'static {
    /// Every volume found under `<rootDir>/pods` as an uncertain mount, and every pod
    /// directory. Reads only.
    fn reconstruct(&self) -> Result<ActualState, VolumeHostError>;
    /// Sets `volume` up (idempotent: a second call neither stacks a mount nor duplicates).
    fn set_up(&self, volume: &PodVolume, context: SetUpContext<'_>) -> Result<(), VolumeHostError>;
    /// Tears the volume down (idempotent).
    fn tear_down(&self, pod_uid: &str, volume: &str, plugin: Plugin)
    -> Result<(), VolumeHostError>;
    /// Unmounts and removes the containers' subPath binds of `volume` under the pod's
    /// `volume-subpaths` (idempotent), before its TearDown, as the kubelet's `CleanSubPaths`.
    fn clean_sub_paths(&self, pod_uid: &str, volume: &str) -> Result<(), VolumeHostError>;
    /// Removes `<rootDir>/pods/<uid>` once nothing of it is set up.
    fn remove_pod_dir(&self, pod_uid: &str) -> Result<(), VolumeHostError>;
    /// What the host allows (memory-backed volumes), for the debug view.
    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
