//! emptyDir SetUp and TearDown as the kubelet does them (`pkg/volume/emptydir`, §1.12): a
//! directory forced to 0777, or for `medium: Memory` a tmpfs sized by the smallest positive of
//! node allocatable memory, the pod's memory limit and `sizeLimit`; a `ready` file marks setup
//! done. The same steps back the tmpfs of secret, downwardAPI and projected volumes.

use std::{fs, io, os::unix::fs::PermissionsExt, path::Path};

use k8s_openapi::api::core::v1::EmptyDirVolumeSource;
use nodepulse_actors::quantity::parse_quantity;

use super::FsError;

use super::mount::{in_private_mount_namespace, is_tmpfs_mount_point, mount_tmpfs, unmount_path};

/// The mode of an emptyDir's directory, whatever the umask.
pub const EMPTY_DIR_MODE: u32 = 0o777;
/// The mode of the plugin metadata directory holding `ready`.
const META_DIR_MODE: u32 = 0o750;
const READY_FILE: &str = "ready";

/// Where an emptyDir's content lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// A directory on the node's disk, under `rootDir`.
    Disk,
    /// A tmpfs, at most `size_bytes` (no `size=` option when nothing bounds it).
    Memory { size_bytes: Option<u64> },
}

/// Why an emptyDir could not be set up or torn down.
#[derive(Debug, thiserror::Error)]
pub enum EmptyDirError {
    /// The kubelet's text; retrying never helps.
    #[error("unknown storage medium {0:?}")]
    UnknownMedium(String),
    /// Retrying never helps until nodepulse supports hugetlbfs.
    #[error("medium {0}: hugePages emptyDir volumes are not supported by nodepulse yet")]
    HugePagesUnsupported(String),
    #[error("invalid sizeLimit {0:?}")]
    InvalidSizeLimit(String),
    /// The process may not mount (no `CAP_SYS_ADMIN`, or a sandbox forbids it); retrying
    /// helps only after the daemon's privileges change.
    #[error(
        "emptyDir medium Memory needs a tmpfs mount and nodepulse may not mount here: {step}: {source}"
    )]
    MemoryMediumUnavailable {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    /// A filesystem operation failed; worth retrying.
    #[error(transparent)]
    Io(#[from] FsError),
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EmptyDirError {
    let at = FsError::at(step, path);
    move |source| at(source).into()
}

/// The medium of `source`. `node_allocatable_memory` and `pod_memory_limit` (bytes; the pod's
/// effective limit as its cgroup gets it) bound a Memory medium with `sizeLimit`.
pub fn medium_of(
    source: &EmptyDirVolumeSource,
    node_allocatable_memory: Option<u64>,
    pod_memory_limit: Option<u64>,
) -> Result<Medium, EmptyDirError> {
    match source.medium.as_deref().unwrap_or_default() {
        "" => Ok(Medium::Disk),
        "Memory" => {
            let size_limit = match &source.size_limit {
                None => None,
                Some(quantity) => Some(
                    parse_quantity(&quantity.0)
                        .map(|bytes| bytes.max(0.0).ceil() as u64)
                        .map_err(|_| EmptyDirError::InvalidSizeLimit(quantity.0.clone()))?,
                ),
            };
            Ok(Medium::Memory {
                size_bytes: tmpfs_size(&[node_allocatable_memory, pod_memory_limit, size_limit]),
            })
        }
        huge if huge == "HugePages" || huge.starts_with("HugePages-") => {
            Err(EmptyDirError::HugePagesUnsupported(huge.to_owned()))
        }
        other => Err(EmptyDirError::UnknownMedium(other.to_owned())),
    }
}

/// The smallest positive bound, as the kubelet computes a memory-backed volume's size.
pub fn tmpfs_size(bounds: &[Option<u64>]) -> Option<u64> {
    bounds.iter().flatten().copied().filter(|b| *b > 0).min()
}

/// Sets up an emptyDir at `volume_dir`, recording readiness under `meta_dir`
/// (`pods/<uid>/plugins/kubernetes.io~empty-dir/<volume>`). Idempotent: a second call neither
/// stacks a second tmpfs nor touches the content.
pub fn set_up(volume_dir: &Path, meta_dir: &Path, medium: Medium) -> Result<(), EmptyDirError> {
    set_up_dir(volume_dir)?;
    if let Medium::Memory { size_bytes } = medium {
        let mounted = is_tmpfs_mount_point(volume_dir).map_err(io_error("stat", volume_dir))?;
        if !mounted {
            mount_tmpfs(volume_dir, size_bytes).map_err(|source| {
                EmptyDirError::MemoryMediumUnavailable {
                    step: "mount tmpfs",
                    source,
                }
            })?;
        }
    }
    set_ready(meta_dir)
}

/// Whether SetUp finished for the volume whose metadata lives in `meta_dir`.
pub fn is_ready(meta_dir: &Path) -> bool {
    meta_dir.join(READY_FILE).is_file()
}

/// Tears an emptyDir down: unmounts its tmpfs if it has one, removes the directory with its
/// content, then the metadata directory. Idempotent.
pub fn tear_down(volume_dir: &Path, meta_dir: &Path) -> Result<(), EmptyDirError> {
    if volume_dir.exists() {
        if is_tmpfs_mount_point(volume_dir).map_err(io_error("stat", volume_dir))? {
            unmount_path(volume_dir).map_err(io_error("unmount", volume_dir))?;
        }
        fs::remove_dir_all(volume_dir).map_err(io_error("remove", volume_dir))?;
    }
    match fs::remove_dir_all(meta_dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("remove", meta_dir)(e)),
        _ => Ok(()),
    }
}

/// Tries a real tmpfs mount in a private mount namespace on a scratch directory under
/// `scratch_parent`, so the daemon can say at start whether `medium: Memory` will work.
pub fn probe_memory_medium(scratch_parent: &Path) -> Result<(), EmptyDirError> {
    let scratch = scratch_parent.join(".nodepulse-tmpfs-probe");
    fs::create_dir_all(&scratch).map_err(io_error("create", &scratch))?;
    let outcome = in_private_mount_namespace(|| mount_tmpfs(&scratch, Some(4096)));
    let _ = fs::remove_dir(&scratch);
    match outcome {
        Err(source) => Err(EmptyDirError::MemoryMediumUnavailable {
            step: "create a private mount namespace",
            source,
        }),
        Ok(Err(source)) => Err(EmptyDirError::MemoryMediumUnavailable {
            step: "mount tmpfs",
            source,
        }),
        Ok(Ok(())) => Ok(()),
    }
}

/// `mkdir -p`, then force the mode: the umask must not narrow an emptyDir.
fn set_up_dir(dir: &Path) -> Result<(), EmptyDirError> {
    fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    let mode = fs::metadata(dir)
        .map_err(io_error("stat", dir))?
        .permissions()
        .mode();
    if mode & 0o777 != EMPTY_DIR_MODE {
        // Keep a setgid bit an fsGroup pass may have set.
        let keep = mode & 0o7000;
        fs::set_permissions(dir, fs::Permissions::from_mode(EMPTY_DIR_MODE | keep))
            .map_err(io_error("chmod", dir))?;
    }
    Ok(())
}

fn set_ready(meta_dir: &Path) -> Result<(), EmptyDirError> {
    fs::create_dir_all(meta_dir).map_err(io_error("create", meta_dir))?;
    fs::set_permissions(meta_dir, fs::Permissions::from_mode(META_DIR_MODE))
        .map_err(io_error("chmod", meta_dir))?;
    let ready = meta_dir.join(READY_FILE);
    fs::File::create(&ready).map_err(io_error("create", &ready))?;
    Ok(())
}

#[cfg(test)]
#[path = "empty_dir_tests.rs"]
mod tests;
