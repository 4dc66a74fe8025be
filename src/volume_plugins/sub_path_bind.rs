//! A subPath's bind under the pod's directory, as the kubelet's `doBindSubPath`: the path
//! opened safely (`sub_path::open_within`) is bound from `/proc/self/fd/<n>` to
//! `volume-subpaths/<volume>/<container>/<index>`, which the runtime then mounts; a bind of
//! the same entry is kept for the container's next start. The binds are unmounted and removed
//! with their volume (`clean_sub_paths`) or, left by an earlier run, with the pod's directory.

use std::{
    fs::{self, DirBuilder, OpenOptions},
    io,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    },
    path::{Path, PathBuf},
};

use nodepulse_actors::volume_manager::{PodDirs, SubPathMount};
use rustix::{
    fs::{FileType, fstat},
    mount::{UnmountFlags, mount_bind, unmount},
};

use super::{
    FsError,
    mount::is_mount_point,
    sub_path::{SubPathFsError, open_within},
};

/// Binds `mount`'s subPath and returns the bind's path: the subPath's links resolved once,
/// the result required inside the volume, then opened without following any link, so a link
/// swapped in after the check makes the open fail instead of the mount escape.
pub fn bind(dirs: &PodDirs, mount: &SubPathMount<'_>) -> Result<PathBuf, SubPathFsError> {
    let volume =
        fs::canonicalize(mount.volume_path).map_err(FsError::at("resolve", mount.volume_path))?;
    let wanted = mount.volume_path.join(mount.sub_path);
    let path = fs::canonicalize(&wanted).map_err(FsError::at("resolve", &wanted))?;
    let opened = open_within(&volume, &path)?;
    let target = dirs.sub_path_target(
        mount.pod_uid,
        mount.volume_name,
        mount.container_name,
        mount.mount_index,
    );
    if bound_already(&target, &opened)? {
        return Ok(target);
    }
    let directory = {
        let stat = fstat(&opened).map_err(|e| FsError::at("stat", &path)(e.into()))?;
        FileType::from_raw_mode(stat.st_mode) == FileType::Directory
    };
    make_target(&target, directory)?;
    let source = format!("/proc/self/fd/{}", opened.as_raw_fd());
    if let Err(error) = mount_bind(&source, &target) {
        let _ = clean_mount_point(&target);
        return Err(FsError::at("bind-mount", &target)(error.into()).into());
    }
    Ok(target)
}

/// Whether `target` is a bind of the very entry `opened` is (a container's restart); a bind
/// of something else (a changed `subPathExpr`) is unmounted.
fn bound_already(target: &Path, opened: &OwnedFd) -> Result<bool, FsError> {
    match is_mount_point(target) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(FsError::at("check mount", target)(e)),
    }
    let wanted = fstat(opened).map_err(|e| FsError::at("stat", target)(e.into()))?;
    let bound = fs::symlink_metadata(target).map_err(FsError::at("stat", target))?;
    if bound.dev() == wanted.st_dev && bound.ino() == wanted.st_ino {
        return Ok(true);
    }
    unmount_all(target)?;
    Ok(false)
}

/// An empty directory (0750) or file (0640) of the subPath's kind at `target`, as the bind's
/// mount point; one of the other kind, left by an earlier bind, is replaced.
fn make_target(target: &Path, directory: bool) -> Result<(), FsError> {
    if let Some(parent) = target.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(parent)
            .map_err(FsError::at("create", parent))?;
    }
    if let Ok(found) = fs::symlink_metadata(target)
        && found.is_dir() != directory
    {
        remove_entry(target)?;
    }
    let made = if directory {
        match DirBuilder::new().mode(0o750).create(target) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    } else {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o640)
            .open(target)
            .map(drop)
    };
    made.map_err(FsError::at("create", target))
}

/// The kubelet's `CleanSubPaths` for `volume` of `pod_uid`: every bind under
/// `volume-subpaths/<volume>/<container>/` unmounted and removed, then those directories.
/// Nothing to do when there are none.
pub fn clean_sub_paths(dirs: &PodDirs, pod_uid: &str, volume: &str) -> Result<(), FsError> {
    let volume_dir = dirs.pod_sub_paths_dir(pod_uid).join(volume);
    for container_dir in entries(&volume_dir)? {
        // Not ours to descend (the kubelet's skip); its parent's removal below reports it.
        if !fs::symlink_metadata(&container_dir).is_ok_and(|found| found.is_dir()) {
            continue;
        }
        for bind in entries(&container_dir)? {
            clean_mount_point(&bind)?;
        }
        remove_entry(&container_dir)?;
    }
    remove_entry(&volume_dir)?;
    let all = dirs.pod_sub_paths_dir(pod_uid);
    match fs::remove_dir(&all) {
        Err(e) if e.kind() != io::ErrorKind::NotFound && !is_not_empty(&e) => {
            Err(FsError::at("remove", &all)(e))
        }
        _ => Ok(()),
    }
}

/// [`clean_sub_paths`] for every volume under the pod's `volume-subpaths`: binds an earlier
/// run left for volumes no longer known (a hostPath's leaves no directory to be found by).
pub fn clean_all_sub_paths(dirs: &PodDirs, pod_uid: &str) -> Result<(), FsError> {
    for volume_dir in entries(&dirs.pod_sub_paths_dir(pod_uid))? {
        if fs::symlink_metadata(&volume_dir).is_ok_and(|found| found.is_dir())
            && let Some(volume) = volume_dir.file_name().and_then(|name| name.to_str())
        {
            clean_sub_paths(dirs, pod_uid, volume)?;
        }
    }
    Ok(())
}

/// The kubelet's `CleanupMountPoint`: unmounted (every bind stacked there), then removed.
fn clean_mount_point(path: &Path) -> Result<(), FsError> {
    if fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    unmount_all(path)?;
    remove_entry(path)
}

fn unmount_all(path: &Path) -> Result<(), FsError> {
    // Bounded: a mount that will not go must not spin the volume manager.
    for _ in 0..16 {
        match is_mount_point(path) {
            Ok(false) => return Ok(()),
            Ok(true) => unmount(path, UnmountFlags::empty())
                .map_err(|e| FsError::at("unmount", path)(e.into()))?,
            Err(e) => return Err(FsError::at("check mount", path)(e)),
        }
    }
    Err(FsError::at("unmount", path)(io::Error::other(
        "still mounted after 16 unmounts",
    )))
}

/// A file or an empty directory removed; absent already is fine.
fn remove_entry(path: &Path) -> Result<(), FsError> {
    let removed = match fs::symlink_metadata(path) {
        Ok(found) if found.is_dir() => fs::remove_dir(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(FsError::at("remove", path)(e)),
        _ => Ok(()),
    }
}

/// Entries of `dir`, sorted; none when it is absent.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, FsError> {
    let listed = match fs::read_dir(dir) {
        Ok(listed) => listed,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FsError::at("read", dir)(e)),
    };
    let mut paths = listed
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(FsError::at("read", dir))?;
    paths.sort();
    Ok(paths)
}

fn is_not_empty(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::NOTEMPTY.raw_os_error())
}

#[cfg(test)]
#[path = "sub_path_bind_tests.rs"]
mod tests;
