//! Why an operation on one (pod, volume) failed, from whichever part failed it: the disk, the
//! volume's content, the API server or the CSI driver. Its text is the kubelet's, the part
//! after `<operation> failed for volume "<name>" : ` in the pod's FailedMount event.

use super::{VolumeHostError, content::ContentError};
use crate::ports::{ApiError, CsiError};

/// One failed operation; each is retried after the volume manager's back-off.
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    #[error(transparent)]
    Host(#[from] VolumeHostError),
    #[error(transparent)]
    Content(#[from] ContentError),
    /// A container's subPath bind that would keep the volume in use.
    #[error("error cleaning subPath mounts: {0}")]
    CleanSubPaths(#[source] VolumeHostError),
    /// The VolumeAttachment's metadata could not be read.
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Csi(#[from] CsiError),
}
