//! The CSI node operations the volume manager asks for, in the kubelet's four steps: stage a
//! volume once per node (MountDevice), publish it into each pod (SetUp), and the reverse
//! (TearDown, then UnmountDevice). The daemon implements it over the driver's gRPC socket;
//! actor tests use a fake. Paths and call order are the adapter's business, not the actor's.

use std::{collections::BTreeMap, path::PathBuf};

use futures::future::BoxFuture;

/// A CSI persistent volume, resolved from a pod's claim and its bound PV (§1.15).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiVolume {
    pub driver: String,
    pub volume_handle: String,
    /// The PV's name: the volume's directory under `pods/<uid>/volumes/kubernetes.io~csi/`.
    pub pv_name: String,
    /// The claim's `readOnly` or the PV's `csi.readOnly`.
    pub read_only: bool,
    pub fs_type: String,
    /// The PV's first access mode (`ReadWriteOnce` when it lists none, as the kubelet does).
    pub access_mode: String,
    pub mount_options: Vec<String>,
    pub volume_attributes: BTreeMap<String, String>,
    /// The VolumeAttachment's `status.attachmentMetadata`, empty for a volume not attached.
    pub publish_context: BTreeMap<String, String>,
}

/// The pod a volume is published into: its UID names the directory; the rest is for the
/// publish-time volume data (`vol_data.json`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiPod {
    pub uid: String,
    pub node_name: String,
}

/// A CSI call that failed, as gRPC-Go prints it: `rpc error: code = <Code> desc = <message>`.
/// Transport failures are `Unavailable`, timeouts `DeadlineExceeded`, as the kubelet sees them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rpc error: code = {code} desc = {message}")]
pub struct CsiCallError {
    pub code: String,
    pub message: String,
}

/// Why a CSI step failed, with the kubelet's texts (§1.7 wraps them in `MountVolume.SetUp failed
/// for volume ...`). Every variant may clear up (a driver registering, a disk coming back), so the
/// reconciler retries on its next pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsiError {
    #[error(
        "kubernetes.io/csi: {operation} failed to get CSI client: driver name {driver} not found in the list of registered CSI drivers"
    )]
    DriverNotRegistered {
        operation: &'static str,
        driver: String,
    },
    #[error(
        "kubernetes.io/csi: {operation} failed to check for STAGE_UNSTAGE_VOLUME capability: {source}"
    )]
    Capabilities {
        operation: &'static str,
        #[source]
        source: CsiCallError,
    },
    /// A directory or `vol_data.json` could not be made, read or removed.
    #[error("kubernetes.io/csi: {operation} failed to {step} {path:?}: {message}")]
    Filesystem {
        operation: &'static str,
        step: &'static str,
        path: PathBuf,
        message: String,
    },
    /// NodeStageVolume or NodePublishVolume failed: the kubelet passes the driver's error on as is.
    #[error("{0}")]
    Call(#[source] CsiCallError),
    #[error("kubernetes.io/csi: mounter.TearDownAt failed: {0}")]
    Unpublish(#[source] CsiCallError),
    #[error("kubernetes.io/csi: attacher.UnmountDevice failed: {0}")]
    Unstage(#[source] CsiCallError),
}

/// What NodeGetInfo reports: the driver's ID for this node, its volume limit, its topology.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiNodeInfo {
    pub node_id: String,
    /// 0 when the driver sets no limit.
    pub max_volumes_per_node: i64,
    pub accessible_topology: BTreeMap<String, String>,
}

pub trait CsiNode: Send + Sync + 'static {
    /// MountDevice: stage the volume once for this node when the driver has
    /// STAGE_UNSTAGE_VOLUME. Returns the staging path, or `None` when the driver does not stage.
    fn mount_device(
        &self,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<Option<PathBuf>, CsiError>>;
    /// SetUp: publish the volume into the pod; returns the path the containers mount.
    fn set_up(
        &self,
        pod: CsiPod,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<PathBuf, CsiError>>;
    /// TearDown: unpublish the volume from the pod and remove its directory.
    fn tear_down(
        &self,
        pod_uid: String,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<(), CsiError>>;
    /// UnmountDevice: unstage the volume (once no pod on the node uses it).
    fn unmount_device(&self, volume: CsiVolume) -> BoxFuture<'static, Result<(), CsiError>>;
}
