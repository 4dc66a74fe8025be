use std::fs;

use super::*;
use crate::volume_plugins::mount::{in_private_mount_namespace, mount_tmpfs, unmount_path};
use rustix::mount::mount_bind;

fn layout(dirs: &PodDirs, uid: &str) {
    let pod = dirs.pod_dir(uid);
    fs::create_dir_all(
        dirs.pod_volumes_dir(uid)
            .join("kubernetes.io~empty-dir/cache"),
    )
    .unwrap();
    fs::create_dir_all(pod.join("volume-subpaths/cache/app/0")).unwrap();
    fs::create_dir_all(pod.join("plugins/kubernetes.io~empty-dir/cache")).unwrap();
    fs::write(pod.join("plugins/kubernetes.io~empty-dir/cache/ready"), b"").unwrap();
    fs::create_dir_all(pod.join("containers/app")).unwrap();
    fs::write(pod.join("containers/app/0a1b2c3d"), b"terminated").unwrap();
    fs::write(pod.join("etc-hosts"), b"127.0.0.1 localhost\n").unwrap();
}

#[test]
fn an_orphaned_pod_dir_with_empty_volume_dirs_is_removed_whole() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    layout(&dirs, "u1");
    remove_pod_dir(&dirs, "u1").unwrap();
    assert!(!dirs.pod_dir("u1").exists());
    // Absent already: nothing to do.
    remove_pod_dir(&dirs, "u1").unwrap();
}

#[test]
fn a_volume_dir_with_content_is_never_emptied() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    layout(&dirs, "u1");
    let data = dirs
        .pod_volumes_dir("u1")
        .join("kubernetes.io~empty-dir/cache/data");
    fs::write(&data, b"still here").unwrap();
    let err = remove_pod_dir(&dirs, "u1").unwrap_err();
    assert!(matches!(err, PodDirError::Remove { .. }), "{err}");
    assert_eq!(fs::read(&data).unwrap(), b"still here");
}

#[test]
fn a_volume_still_mounted_stops_the_cleanup() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    layout(&dirs, "u1");
    let volume = dirs
        .pod_volumes_dir("u1")
        .join("kubernetes.io~empty-dir/cache");
    let outcome = in_private_mount_namespace(|| {
        mount_tmpfs(&volume, Some(4096)).unwrap();
        let result = remove_pod_dir(&dirs, "u1");
        unmount_path(&volume).unwrap();
        result
    });
    match outcome {
        Ok(result) => {
            let err = result.unwrap_err();
            assert!(matches!(err, PodDirError::MountPoint { .. }), "{err}");
            assert!(
                err.to_string().ends_with("cache is still a mount point"),
                "{err}"
            );
            assert!(volume.is_dir());
        }
        // No private mount namespace on this host: nothing can be mounted, nothing to prove.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}"),
    }
}

#[test]
fn links_in_the_pod_dir_are_never_followed_into_the_directories_they_name() {
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir(outside.path().join("empty-but-not-the-pods")).unwrap();
    for planted in [
        "volume-subpaths/cache/app/0/link",
        "volumes/kubernetes.io~link",
    ] {
        let root = tempfile::tempdir().unwrap();
        let dirs = PodDirs::new(root.path());
        layout(&dirs, "u1");
        let link = dirs.pod_dir("u1").join(planted);
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        let err = remove_pod_dir(&dirs, "u1").unwrap_err();
        assert!(
            matches!(
                err,
                PodDirError::Remove { .. } | PodDirError::SubPath { .. }
            ),
            "{planted}: {err}"
        );
        assert!(
            outside.path().join("empty-but-not-the-pods").is_dir(),
            "{planted}: an empty directory behind the link was removed"
        );
    }
}

#[test]
fn a_bind_mount_from_the_same_filesystem_anywhere_below_stops_the_cleanup() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    layout(&dirs, "u1");
    // Someone else's data, bound into the pod's bookkeeping: the same device, so only the
    // mount's root attribute (or the mount table) shows it.
    let theirs = root.path().join("theirs");
    fs::create_dir_all(&theirs).unwrap();
    fs::write(theirs.join("data"), b"not the pod's").unwrap();
    let target = dirs.pod_dir("u1").join("containers/app");
    let outcome = in_private_mount_namespace(|| {
        mount_bind(&theirs, &target).unwrap();
        let result = remove_pod_dir(&dirs, "u1");
        unmount_path(&target).unwrap();
        result
    });
    match outcome {
        Ok(result) => {
            let err = result.unwrap_err();
            assert!(matches!(err, PodDirError::MountPoint { .. }), "{err}");
            assert!(
                err.to_string().ends_with("app is still a mount point"),
                "{err}"
            );
            assert_eq!(fs::read(theirs.join("data")).unwrap(), b"not the pod's");
            assert!(
                dirs.pod_dir("u1").join("etc-hosts").exists(),
                "nothing removed"
            );
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}"),
    }
}
