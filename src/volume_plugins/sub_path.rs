//! Containers' `subPath`s on the node's disk, as the kubelet's `subpath_linux.go`: a missing
//! directory is made one `mkdirat` at a time below a descriptor, and the subPath is opened
//! from its volume's root one component at a time, never through a link (`O_NOFOLLOW`), then
//! bound (`sub_path_bind`) so the runtime mounts the opened directory, not a path a container
//! sharing the volume can redirect. Both refuse anything that leads out of the volume.

use std::{
    ffi::OsStr,
    fs, io,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::fs::MetadataExt,
    },
    path::{Component, Path, PathBuf},
};

use nodepulse_actors::volume_manager::{PodDirs, SubPathHost, SubPathHostError, SubPathMount};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, fchmod, fstat, mkdirat, open, openat, statat};

use super::{FsError, sub_path_bind};

/// Why a subPath was not made or bound. Only the node's log shows it; retrying helps only once
/// the volume's content changed.
#[derive(Debug, thiserror::Error)]
pub enum SubPathFsError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("subpath {} is outside of the volume {}", .path.display(), .volume.display())]
    Outside { path: PathBuf, volume: PathBuf },
    #[error("unexpected symlink found {}", .0.display())]
    Symlink(PathBuf),
}

/// The [`SubPathHost`] of one `rootDir`.
pub struct DiskSubPaths {
    dirs: PodDirs,
}

impl DiskSubPaths {
    pub fn new(dirs: PodDirs) -> Self {
        Self { dirs }
    }
}

impl SubPathHost for DiskSubPaths {
    fn make_missing_dirs(&self, mount: &SubPathMount<'_>) -> Result<(), SubPathHostError> {
        make_missing_dirs(mount.volume_path, mount.sub_path)
            .map_err(|e| SubPathHostError(e.to_string()))
    }

    fn bind(&self, mount: &SubPathMount<'_>) -> Result<PathBuf, SubPathHostError> {
        sub_path_bind::bind(&self.dirs, mount).map_err(|e| SubPathHostError(e.to_string()))
    }
}

/// `subPath` made below `volume` when it does not exist (the kubelet's `SafeMakeDir`): each
/// missing directory with the volume's mode, setgid and sticky bits included, set past the
/// umask through a descriptor that refuses a link, so an fsGroup volume's subPath stays
/// group-writable. A path that exists, through links or not, is left to [`open_within`].
pub fn make_missing_dirs(volume: &Path, sub_path: &str) -> Result<(), SubPathFsError> {
    match fs::metadata(volume.join(sub_path)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // Present; or unknown (as the kubelet, the bind that follows says why).
        _ => return Ok(()),
    }
    let mode = fs::metadata(volume)
        .map_err(FsError::at("stat", volume))?
        .mode()
        & 0o7777;
    let root = fs::canonicalize(volume).map_err(FsError::at("resolve", volume))?;
    let names: Vec<&OsStr> = Path::new(sub_path)
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    // The longest prefix that exists (links followed), which must resolve inside the volume.
    let existing = (0..names.len())
        .take_while(|&count| fs::metadata(joined(&root, &names[..=count])).is_ok())
        .count();
    let prefix = joined(&root, &names[..existing]);
    let resolved = fs::canonicalize(&prefix).map_err(FsError::at("resolve", &prefix))?;
    let mut parent = open_within(&root, &resolved)?;
    let mut current = resolved;
    let mode = Mode::from_raw_mode(mode);
    for name in &names[existing..] {
        current.push(name);
        let create = |e: rustix::io::Errno| FsError::at("create", &current)(e.into());
        mkdirat(&parent, *name, mode).map_err(create)?;
        // Opened as itself: the pod may have swapped the new directory for a link meanwhile.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let child = openat(&parent, *name, flags, Mode::empty()).map_err(create)?;
        fchmod(&child, mode).map_err(create)?;
        parent = child;
    }
    Ok(())
}

fn joined(root: &Path, names: &[&OsStr]) -> PathBuf {
    names
        .iter()
        .fold(root.to_path_buf(), |path, name| path.join(name))
}

/// `path` (its links already resolved by the caller) opened from `base` one component at a
/// time, each as itself (`O_PATH | O_NOFOLLOW`) and refused if it is a link — the kubelet's
/// `doSafeOpen`. Whatever a container renames meanwhile, the descriptor is of an entry reached
/// from `base` through directories only; where the kernel says it now is must be in `base`.
pub fn open_within(base: &Path, path: &Path) -> Result<OwnedFd, SubPathFsError> {
    let outside = || SubPathFsError::Outside {
        path: path.to_path_buf(),
        volume: base.to_path_buf(),
    };
    let relative = path.strip_prefix(base).map_err(|_| outside())?;
    let step = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut current =
        open(base, step, Mode::empty()).map_err(|e| FsError::at("open", base)(e.into()))?;
    let mut walked = base.to_path_buf();
    for part in relative.components() {
        let Component::Normal(name) = part else {
            return Err(outside());
        };
        walked.push(name);
        // An automounted directory mounts on a lookup with a trailing slash (openat(2)).
        let _ = statat(
            &current,
            Path::new(name).join(""),
            AtFlags::SYMLINK_NOFOLLOW,
        );
        let next = openat(&current, name, step, Mode::empty())
            .map_err(|e| FsError::at("open", &walked)(e.into()))?;
        let stat = fstat(&next).map_err(|e| FsError::at("stat", &walked)(e.into()))?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
            return Err(SubPathFsError::Symlink(walked));
        }
        current = next;
    }
    let proc_path = PathBuf::from(format!("/proc/self/fd/{}", current.as_raw_fd()));
    let now_at = fs::read_link(&proc_path).map_err(FsError::at("read", &proc_path))?;
    if !now_at.starts_with(base) {
        return Err(SubPathFsError::Outside {
            path: now_at,
            volume: base.to_path_buf(),
        });
    }
    Ok(current)
}

#[cfg(test)]
#[path = "sub_path_tests.rs"]
mod tests;
