//! The reconciler's Mount and Unmount operations for the plugins that need nothing but the
//! node itself (emptyDir, hostPath), and the TearDown every atomic-writer plugin shares (its
//! content sits in a wrapped emptyDir, §1.11). Sources that need the API (configMap, secret,
//! downwardAPI, projected) and CSI are refused here with a typed error, never faked.

use k8s_openapi::api::core::v1::HostPathVolumeSource;
use nodepulse_actors::volume_manager::{Plugin, PodDirs, PodVolume};

use super::{
    empty_dir::{self, EmptyDirError},
    host_path::{self, HostPathError},
};

/// What bounds a memory-backed volume besides its own `sizeLimit` (bytes, `None` = unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryBounds {
    pub node_allocatable: Option<u64>,
    pub pod_limit: Option<u64>,
}

/// Why an operation failed. The `Display` text is what follows `MountVolume.SetUp failed for
/// volume "<name>" : ` in the pod's `FailedMount` event.
#[derive(Debug, thiserror::Error)]
pub enum VolumeOpError {
    #[error(transparent)]
    EmptyDir(#[from] EmptyDirError),
    #[error(transparent)]
    HostPath(#[from] HostPathError),
    /// The operation belongs to a layer not built yet; retrying does not help.
    #[error(
        "{plugin} volumes are not set up by the node-local operations: {}",
        not_local_reason(*.plugin)
    )]
    NotLocal { plugin: Plugin },
    /// The volume's spec does not match its plugin (a caller's bug; retrying does not help).
    #[error("volume {0:?} has no source for its plugin")]
    MissingSource(String),
}

/// Why `plugin` is not set up by [`set_up_local`].
fn not_local_reason(plugin: Plugin) -> &'static str {
    match plugin {
        Plugin::Csi => "the CSI layer sets them up, and it is not part of this build",
        _ => "their content is read from the API first",
    }
}

/// SetUp of an emptyDir, hostPath or image volume for `pod_uid`. Idempotent.
pub fn set_up_local(
    dirs: &PodDirs,
    pod_uid: &str,
    volume: &PodVolume,
    bounds: MemoryBounds,
) -> Result<(), VolumeOpError> {
    let missing = || VolumeOpError::MissingSource(volume.name.clone());
    match volume.plugin {
        Plugin::EmptyDir => {
            let spec = volume.spec.volume();
            let source = spec.empty_dir.as_ref().ok_or_else(missing)?;
            let medium = empty_dir::medium_of(source, bounds.node_allocatable, bounds.pod_limit)?;
            empty_dir::set_up(
                &dirs.volume_dir(pod_uid, Plugin::EmptyDir, &volume.name),
                &wrapper_meta_dir(dirs, pod_uid, &volume.name),
                medium,
            )?;
            Ok(())
        }
        Plugin::HostPath => {
            let spec = volume.spec.volume();
            let HostPathVolumeSource { path, type_ } =
                spec.host_path.as_ref().ok_or_else(missing)?;
            host_path::set_up(path, type_.as_deref())?;
            Ok(())
        }
        // The kubelet's image plugin: SetUp does nothing; the runtime mounts the image.
        Plugin::Image => Ok(()),
        plugin => Err(VolumeOpError::NotLocal { plugin }),
    }
}

/// TearDown of `volume` of `pod_uid`: the directory and its emptyDir metadata go (a tmpfs is
/// unmounted first); hostPath leaves the host's path alone, and an image volume has nothing
/// here. Idempotent.
pub fn tear_down(
    dirs: &PodDirs,
    pod_uid: &str,
    volume: &str,
    plugin: Plugin,
) -> Result<(), VolumeOpError> {
    match plugin {
        Plugin::HostPath | Plugin::Image => Ok(()),
        Plugin::Csi => Err(VolumeOpError::NotLocal { plugin }),
        Plugin::EmptyDir
        | Plugin::ConfigMap
        | Plugin::Secret
        | Plugin::DownwardApi
        | Plugin::Projected => {
            empty_dir::tear_down(
                &dirs.volume_dir(pod_uid, plugin, volume),
                &wrapper_meta_dir(dirs, pod_uid, volume),
            )?;
            Ok(())
        }
    }
}

/// The kubelet keeps the `ready` file of every emptyDir, wrapped or not, under the emptyDir
/// plugin's metadata directory.
pub fn wrapper_meta_dir(dirs: &PodDirs, pod_uid: &str, volume: &str) -> std::path::PathBuf {
    dirs.volume_plugin_dir(pod_uid, Plugin::EmptyDir, volume)
}

#[cfg(test)]
#[path = "operations_tests.rs"]
mod tests;
