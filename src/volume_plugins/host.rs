//! [`VolumeHost`] on the real filesystem under `rootDir`: emptyDir and hostPath SetUp, and for
//! configMap, secret, downwardAPI and projected volumes the kubelet's wrapped emptyDir (on disk
//! for configMap; a tmpfs for the others when nodepulse may mount, else on disk, said once in
//! the log) filled by the atomic writer; emptyDir and those given to the pod's `fsGroup`. CSI
//! is refused with the typed "not local" error.

use std::sync::atomic::{AtomicBool, Ordering};

use nodepulse_actors::{
    volume_manager::{ActualState, Plugin, PodDirs, PodVolume},
    volume_manager::{SetUpContext, VolumeHost, VolumeHostError},
};
use serde_json::json;

use super::{
    atomic_writer::{AtomicWriteError, AtomicWriter},
    empty_dir::{self, Medium},
    operations::{MemoryBounds, VolumeOpError, set_up_local, tear_down, wrapper_meta_dir},
    ownership::set_volume_ownership,
    pod_dir::remove_pod_dir,
    reconstruct::reconstruct,
    sub_path_bind::clean_sub_paths,
};

/// The pods' volumes under one `rootDir`.
pub struct DiskVolumeHost {
    dirs: PodDirs,
    /// Why a tmpfs cannot be mounted here, if it cannot (probed once at start).
    no_tmpfs: Option<String>,
}

/// The fallback to disk is said once per process, not once per node of a fleet.
static SAID_NO_TMPFS: AtomicBool = AtomicBool::new(false);

impl DiskVolumeHost {
    /// Probes whether tmpfs mounts work here (see [`probe_tmpfs`]).
    pub fn new(dirs: PodDirs) -> Self {
        Self::with_tmpfs(dirs, probe_tmpfs())
    }

    /// With the answer of an earlier [`probe_tmpfs`] (a fleet probes once for all its nodes).
    pub fn with_tmpfs(dirs: PodDirs, no_tmpfs: Option<String>) -> Self {
        Self { dirs, no_tmpfs }
    }

    pub fn dirs(&self) -> &PodDirs {
        &self.dirs
    }

    /// Where an API-backed volume's files live: on disk for configMap (as the kubelet), in
    /// memory for the others when a tmpfs can be mounted.
    fn wrapper_medium(&self, plugin: Plugin, bounds: MemoryBounds) -> Medium {
        if plugin == Plugin::ConfigMap {
            return Medium::Disk;
        }
        match &self.no_tmpfs {
            None => Medium::Memory {
                size_bytes: empty_dir::tmpfs_size(&[bounds.node_allocatable, bounds.pod_limit]),
            },
            Some(reason) => {
                if !SAID_NO_TMPFS.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%reason, "secret, downwardAPI and projected volumes are written to disk under rootDir, not to a tmpfs as the kubelet does: nodepulse may not mount here");
                }
                Medium::Disk
            }
        }
    }

    fn set_up_api_volume(
        &self,
        volume: &PodVolume,
        context: SetUpContext<'_>,
        bounds: MemoryBounds,
    ) -> Result<(), VolumeHostError> {
        let Some(content) = context.content else {
            return Err(failed(VolumeOpError::MissingSource(volume.name.clone())));
        };
        let dir = self
            .dirs
            .volume_dir(context.pod_uid, volume.plugin, &volume.name);
        let meta = wrapper_meta_dir(&self.dirs, context.pod_uid, &volume.name);
        empty_dir::set_up(&dir, &meta, self.wrapper_medium(volume.plugin, bounds))
            .map_err(|e| failed(VolumeOpError::from(e)))?;
        AtomicWriter::new(&dir)
            .map(|writer| writer.with_fs_group(context.fs_group))
            .and_then(|writer| writer.write(content))
            .map(|_| ())
            .map_err(written)
    }
}

/// Why this process cannot mount a tmpfs, if it cannot: a real mount tried in a private mount
/// namespace, on a scratch directory of its own under the temporary directory.
pub fn probe_tmpfs() -> Option<String> {
    let scratch = std::env::temp_dir().join(format!(
        "nodepulse-tmpfs-probe-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    if let Err(error) = create_private_dir(&scratch) {
        return Some(format!("create {}: {error}", scratch.display()));
    }
    let outcome = empty_dir::probe_memory_medium(&scratch)
        .err()
        .map(|e| e.to_string());
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

/// A new directory only this user may enter (0700): in a shared directory such as `/tmp`, an
/// existing name, a link someone planted included, is an error rather than used.
fn create_private_dir(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

fn failed(error: VolumeOpError) -> VolumeHostError {
    let retryable = matches!(
        &error,
        VolumeOpError::EmptyDir(empty_dir::EmptyDirError::Io(_))
    );
    VolumeHostError {
        message: error.to_string(),
        retryable,
    }
}

fn written(error: AtomicWriteError) -> VolumeHostError {
    VolumeHostError {
        retryable: error.is_retryable(),
        message: error.to_string(),
    }
}

impl VolumeHost for DiskVolumeHost {
    fn reconstruct(&self) -> Result<ActualState, VolumeHostError> {
        let found = reconstruct(&self.dirs).map_err(|e| VolumeHostError {
            message: e.to_string(),
            retryable: true,
        })?;
        for failed in &found.failed {
            tracing::warn!(pod_uid = %failed.pod_uid, plugin = %failed.plugin_dir, volume = %failed.volume, "a volume directory nodepulse cannot take over; left alone");
        }
        Ok(found.actual)
    }

    fn set_up(&self, volume: &PodVolume, context: SetUpContext<'_>) -> Result<(), VolumeHostError> {
        let bounds = MemoryBounds {
            node_allocatable: context
                .allocatable
                .get("memory")
                .map(|bytes| bytes.max(0.0) as u64),
            pod_limit: context.pod_memory_limit,
        };
        match volume.plugin {
            Plugin::ConfigMap | Plugin::Secret | Plugin::DownwardApi | Plugin::Projected => {
                self.set_up_api_volume(volume, context, bounds)
            }
            Plugin::EmptyDir => {
                set_up_local(&self.dirs, context.pod_uid, volume, bounds).map_err(failed)?;
                let Some(group) = context.fs_group else {
                    return Ok(());
                };
                let dir = self
                    .dirs
                    .volume_dir(context.pod_uid, volume.plugin, &volume.name);
                set_volume_ownership(&dir, group, false).map_err(|error| VolumeHostError {
                    message: error.to_string(),
                    retryable: true,
                })
            }
            Plugin::HostPath | Plugin::Csi | Plugin::Image => {
                set_up_local(&self.dirs, context.pod_uid, volume, bounds).map_err(failed)
            }
        }
    }

    fn tear_down(
        &self,
        pod_uid: &str,
        volume: &str,
        plugin: Plugin,
    ) -> Result<(), VolumeHostError> {
        tear_down(&self.dirs, pod_uid, volume, plugin).map_err(failed)
    }

    fn clean_sub_paths(&self, pod_uid: &str, volume: &str) -> Result<(), VolumeHostError> {
        clean_sub_paths(&self.dirs, pod_uid, volume).map_err(|e| VolumeHostError {
            message: e.to_string(),
            retryable: true,
        })
    }

    fn remove_pod_dir(&self, pod_uid: &str) -> Result<(), VolumeHostError> {
        remove_pod_dir(&self.dirs, pod_uid).map_err(|e| VolumeHostError {
            message: e.to_string(),
            retryable: true,
        })
    }

    fn describe(&self) -> serde_json::Value {
        json!({
            "rootDir": self.dirs.root_dir(),
            "memoryBackedVolumes": match &self.no_tmpfs {
                None => "tmpfs (secret, downwardAPI, projected, emptyDir medium Memory)".to_owned(),
                Some(reason) => format!("on disk: secret, downwardAPI and projected files are written under rootDir; emptyDir medium Memory fails per pod ({reason})"),
            },
        })
    }
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
