//! Removal of a pod's directory once nothing of it is set up, the kubelet's
//! `cleanupOrphanedPodDirs` (§1.17): volume directories are only ever `rmdir`ed, never emptied,
//! and nothing on another filesystem, behind a link, or below a mount (a bind mount from the
//! same filesystem included, which no device check sees: `statx` says it is a mount's root) is
//! crossed; the containers' subPath binds (nodepulse's own) are unmounted first. Data it
//! cannot prove unused stays on disk with an error saying where.

use std::{
    fs, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use nodepulse_actors::volume_manager::PodDirs;

use super::{FsError, mount::mount_points_within, sub_path_bind::clean_all_sub_paths};

/// Why a pod directory stays. Retrying helps once its volumes are torn down.
#[derive(Debug, thiserror::Error)]
pub enum PodDirError {
    #[error("pod directory {}: {} is still a mount point", pod_dir.display(), path.display())]
    MountPoint { pod_dir: PathBuf, path: PathBuf },
    #[error("pod directory {}: cannot tell what is mounted below it: {source}", pod_dir.display())]
    MountScan {
        pod_dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A container's subPath bind, left by an earlier run, that would not go.
    #[error("pod directory {}: {source}", pod_dir.display())]
    SubPath {
        pod_dir: PathBuf,
        #[source]
        source: FsError,
    },
    #[error("pod directory {}: remove {}: {source}", pod_dir.display(), path.display())]
    Remove {
        pod_dir: PathBuf,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Removes `<root>/pods/<pod_uid>`. The caller has checked that no volume of the pod is (or may
/// be) set up; a volume directory that is not empty is still refused here.
pub fn remove_pod_dir(dirs: &PodDirs, pod_uid: &str) -> Result<(), PodDirError> {
    let pod_dir = dirs.pod_dir(pod_uid);
    let Ok(pod_meta) = fs::symlink_metadata(&pod_dir) else {
        return Ok(());
    };
    let cleanup = Cleanup {
        pod_dir: pod_dir.clone(),
        device: pod_meta.dev(),
    };
    // The containers' subPath binds are nodepulse's own, and hold only what a volume held:
    // unmounted first, so one an earlier run left (a hostPath's has no volume directory to
    // be found and torn down by) does not keep the directory forever.
    clean_all_sub_paths(dirs, pod_uid).map_err(|source| PodDirError::SubPath {
        pod_dir: pod_dir.clone(),
        source,
    })?;
    // Anything else mounted below belongs to someone (a volume torn down elsewhere, a runtime, an
    // operator): removing through it would delete that mount's data.
    let mounted = mount_points_within(&pod_dir).map_err(|source| PodDirError::MountScan {
        pod_dir: pod_dir.clone(),
        source,
    })?;
    if let Some(path) = mounted.into_iter().next() {
        return Err(PodDirError::MountPoint { pod_dir, path });
    }
    // Each volume directory, then the plugin directories holding them: rmdir only.
    let volumes = dirs.pod_volumes_dir(pod_uid);
    for plugin_dir in children(&volumes) {
        // A link in a plugin's place is not descended: its rmdir below refuses it.
        let volume_dirs = if is_real_dir(&plugin_dir) {
            children(&plugin_dir)
        } else {
            Vec::new()
        };
        for volume_dir in volume_dirs {
            cleanup.refuse_mount_point(&volume_dir)?;
            cleanup.rmdir(&volume_dir)?;
        }
        cleanup.rmdir(&plugin_dir)?;
    }
    cleanup.remove_empty_tree(&pod_dir.join("volume-subpaths"))?;
    // The rest (plugins/, containers/, etc-hosts) is the pod's own bookkeeping.
    for child in children(&pod_dir) {
        cleanup.remove_same_filesystem(&child)?;
    }
    cleanup.rmdir(&pod_dir)
}

struct Cleanup {
    pod_dir: PathBuf,
    device: u64,
}

impl Cleanup {
    fn refuse_mount_point(&self, path: &Path) -> Result<(), PodDirError> {
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.dev() != self.device => Err(PodDirError::MountPoint {
                pod_dir: self.pod_dir.clone(),
                path: path.to_path_buf(),
            }),
            _ => Ok(()),
        }
    }

    fn rmdir(&self, path: &Path) -> Result<(), PodDirError> {
        match fs::remove_dir(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(self.remove_failed(path, e)),
            _ => Ok(()),
        }
    }

    /// Directories only, bottom-up; a file (or a link) inside is an error.
    fn remove_empty_tree(&self, dir: &Path) -> Result<(), PodDirError> {
        if !is_real_dir(dir) {
            return Ok(());
        }
        self.refuse_mount_point(dir)?;
        for child in children(dir) {
            self.remove_empty_tree(&child)?;
        }
        self.rmdir(dir)
    }

    /// Files and directories, never descending into another filesystem.
    fn remove_same_filesystem(&self, path: &Path) -> Result<(), PodDirError> {
        let Ok(meta) = fs::symlink_metadata(path) else {
            return Ok(());
        };
        if !meta.is_dir() {
            return fs::remove_file(path).map_err(|e| self.remove_failed(path, e));
        }
        self.refuse_mount_point(path)?;
        for child in children(path) {
            self.remove_same_filesystem(&child)?;
        }
        self.rmdir(path)
    }

    fn remove_failed(&self, path: &Path, source: io::Error) -> PodDirError {
        PodDirError::Remove {
            pod_dir: self.pod_dir.clone(),
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A directory itself, not a link to one.
fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// Entries directly under `dir`; none if it is absent or unreadable (the rmdir that follows
/// reports the real problem).
fn children(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    paths
}

#[cfg(test)]
#[path = "pod_dir_tests.rs"]
mod tests;
