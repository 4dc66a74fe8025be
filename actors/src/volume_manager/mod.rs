//! The volume manager's pure core: which volumes the pods bound here need (desired state), what
//! is set up on disk (actual state), and the operations that reconcile them, after the kubelet's
//! `pkg/kubelet/volumemanager`. No I/O here: the daemon's `volume_plugins` module does the disk work.

mod actor;
#[cfg(test)]
mod actor_csi_tests;
#[cfg(test)]
mod actor_tests;
pub mod claim;
pub mod content;
pub mod csi_names;
mod debug;
mod fetch;
#[cfg(test)]
mod fetch_tests;
#[cfg(test)]
mod fixtures;
pub mod layout;
pub mod memory;
mod operation_error;
pub mod plugin;
pub mod ports;
pub mod reconcile;
pub mod spec;
pub mod state;
pub mod wait;

pub use actor::{
    CLAIM_RETRY, CsiPorts, RECONCILE_PERIOD, VolumeManagerActor, VolumeManagerPeers,
    VolumeManagerSettings,
};
pub use claim::{
    ClaimError, ClaimReason, ClaimRef, attach_required, bound_volume_name, csi_volume,
};
pub use csi_names::{attachment_name, csi_unique_name};
pub use layout::{PodDirs, UniqueVolumeName};
pub use memory::{VolumeManagerMemory, VolumeView};
pub use plugin::Plugin;
pub use ports::{
    PodVolumeView, PodVolumesChanged, ResolvedClaim, SetUpContext, StorageApi, SubPathHost,
    SubPathHostError, SubPathMount, VolumeHost, VolumeHostError, VolumeSourceApi, resolve_claim,
    volumes_ready,
};
pub use reconcile::{Operation, REMOUNT_PERIOD, reconcile, volumes_in_use};
pub use spec::{
    PodVolume, PodVolumes, ResolvedClaims, SpecError, VolumeSpec, pod_volumes, pod_volumes_with,
};
pub use state::{
    ActualState, DesiredPod, DesiredState, MountState, MountedVolume, PodVolumeMap, StagedDevice,
};
pub use wait::{MountReadiness, UnmountedVolumes, mount_readiness, pod_error_message};

/// The name VolumeManagerActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "volume-manager";
