//! The narrow interfaces through which the volume manager (and the pods' provider, for its
//! volumes and their sources) reach the disk, the API's volume objects and each other. Here,
//! beside the volume manager's types they carry, so `ports` below never names the room above it.

#[cfg(any(test, feature = "fakes"))]
pub mod fakes;
mod pod_volumes;
mod storage;
mod sub_paths;
mod volume_host;
mod volume_sources;

pub use pod_volumes::{PodVolumeView, PodVolumesChanged, volumes_ready};
pub use storage::{ResolvedClaim, StorageApi, resolve_claim};
pub use sub_paths::{SubPathHost, SubPathHostError, SubPathMount};
pub use volume_host::{SetUpContext, VolumeHost, VolumeHostError};
pub use volume_sources::VolumeSourceApi;
