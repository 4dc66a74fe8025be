//! The node's disk as a container's `subPath` reaches it (the kubelet's `subpath.Interface`):
//! a missing directory made inside its volume, then the path opened without following a link
//! and bound under the pod's directory, so the runtime mounts what was checked and nothing a
//! container swapped in meanwhile. The daemon's `volume_plugins` module implements it.

use std::path::{Path, PathBuf};

/// One `volumeMounts` entry's subPath, as the kubelet's `subpath.Subpath`.
#[derive(Debug, Clone, Copy)]
pub struct SubPathMount<'a> {
    pub pod_uid: &'a str,
    /// The volume's name; it names the bind target's directory.
    pub volume_name: &'a str,
    /// Where the volume is set up on the host.
    pub volume_path: &'a Path,
    /// Relative, without `..` (checked by the caller), after `subPathExpr`'s expansion.
    pub sub_path: &'a str,
    pub container_name: &'a str,
    /// The entry's index in the container's `volumeMounts`.
    pub mount_index: usize,
}

/// Why the host could not make or bind a subPath. The text is for the node's log: the pod
/// is told only which mount failed, as the kubelet keeps the host's paths from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SubPathHostError(pub String);

pub trait SubPathHost: Send + Sync + 'static {
    /// Makes the subPath's missing directories inside the volume, with the volume's mode (the
    /// kubelet's `SafeMakeDir`, done only when the path does not exist). Nothing is ever made
    /// outside the volume, whatever links the pod planted.
    fn make_missing_dirs(&self, mount: &SubPathMount<'_>) -> Result<(), SubPathHostError>;

    /// Binds the subPath, opened one component at a time without following a link, to
    /// `volume-subpaths/<volume>/<container>/<index>` under the pod's directory, and returns
    /// that path for the runtime (the kubelet's `PrepareSafeSubpath`). Refuses a path that
    /// leads out of the volume. The bind stays until the volume is torn down.
    fn bind(&self, mount: &SubPathMount<'_>) -> Result<PathBuf, SubPathHostError>;
}
