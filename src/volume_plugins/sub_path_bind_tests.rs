use std::os::unix::fs::symlink;

use super::*;
use crate::volume_plugins::mount::{in_private_mount_namespace, mount_count};

/// A rootDir with an emptyDir `data` of pod `u1` holding `logs/` (with a file), `other/`, a
/// file `settings`, and `out`, a link out of the volume.
struct Pod {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    dirs: PodDirs,
}

impl Pod {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("host-only"), b"the host's").unwrap();
        let dirs = PodDirs::new(root.path());
        let pod = Self {
            root,
            outside,
            dirs,
        };
        let volume = pod.volume();
        fs::create_dir_all(volume.join("logs")).unwrap();
        fs::create_dir_all(volume.join("other")).unwrap();
        fs::write(volume.join("logs/app.log"), b"log").unwrap();
        fs::write(volume.join("settings"), b"k=v").unwrap();
        symlink(pod.outside.path(), volume.join("out")).unwrap();
        pod
    }

    fn volume(&self) -> PathBuf {
        self.root
            .path()
            .join("pods/u1/volumes/kubernetes.io~empty-dir/data")
    }

    fn mount<'a>(&'a self, volume: &'a Path, sub_path: &'a str, index: usize) -> SubPathMount<'a> {
        SubPathMount {
            pod_uid: "u1",
            volume_name: "data",
            volume_path: volume,
            sub_path,
            container_name: "app",
            mount_index: index,
        }
    }
}

/// Runs `f` in a private mount namespace; `None` where the host allows none (nothing can be
/// mounted, so nothing to prove).
fn mounting<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    match in_private_mount_namespace(f) {
        Ok(outcome) => Some(outcome),
        Err(e) => {
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            None
        }
    }
}

#[test]
fn a_sub_path_is_bound_under_the_pods_directory_and_kept_for_the_next_start() {
    let pod = Pod::new();
    let volume = pod.volume();
    mounting(|| {
        let target = bind(&pod.dirs, &pod.mount(&volume, "logs", 2)).unwrap();
        assert_eq!(
            target,
            pod.root.path().join("pods/u1/volume-subpaths/data/app/2")
        );
        assert_eq!(fs::read(target.join("app.log")).unwrap(), b"log");
        // The container's restart: the same bind, not a second one on top.
        assert_eq!(
            bind(&pod.dirs, &pod.mount(&volume, "logs", 2)).unwrap(),
            target
        );
        assert_eq!(mount_count(&target).unwrap(), 1);
        // Another subPath for the same entry (a changed subPathExpr): bound instead.
        bind(&pod.dirs, &pod.mount(&volume, "other", 2)).unwrap();
        assert_eq!(mount_count(&target).unwrap(), 1);
        assert!(!target.join("app.log").exists());
        // A file, on a file.
        let file = bind(&pod.dirs, &pod.mount(&volume, "settings", 3)).unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"k=v");
    });
}

#[test]
fn a_sub_path_leading_out_of_the_volume_is_refused_and_nothing_is_left_bound() {
    let pod = Pod::new();
    let volume = pod.volume();
    mounting(|| {
        for sub_path in ["out", "out/.", "logs/../out"] {
            let error = bind(&pod.dirs, &pod.mount(&volume, sub_path, 0)).unwrap_err();
            assert!(
                matches!(error, SubPathFsError::Outside { .. }),
                "{sub_path}: {error}"
            );
        }
        assert!(!pod.dirs.sub_path_target("u1", "data", "app", 0).exists());
        assert_eq!(
            fs::read(pod.outside.path().join("host-only")).unwrap(),
            b"the host's"
        );
    });
}

#[test]
fn cleaning_a_volumes_sub_paths_unmounts_and_removes_every_bind_and_leaves_the_volume_whole() {
    let pod = Pod::new();
    let volume = pod.volume();
    mounting(|| {
        let logs = bind(&pod.dirs, &pod.mount(&volume, "logs", 0)).unwrap();
        bind(&pod.dirs, &pod.mount(&volume, "settings", 1)).unwrap();
        clean_sub_paths(&pod.dirs, "u1", "data").unwrap();
        assert!(!pod.dirs.pod_sub_paths_dir("u1").exists());
        assert_eq!(mount_count(&logs).unwrap(), 0);
        assert_eq!(fs::read(volume.join("logs/app.log")).unwrap(), b"log");
        assert_eq!(fs::read(volume.join("settings")).unwrap(), b"k=v");
        // Nothing left: nothing to do.
        clean_sub_paths(&pod.dirs, "u1", "data").unwrap();
    });
}

#[test]
fn a_pod_directory_with_binds_an_earlier_run_left_is_removed_whole() {
    let pod = Pod::new();
    let volume = pod.volume();
    mounting(|| {
        bind(&pod.dirs, &pod.mount(&volume, "logs", 0)).unwrap();
        // The volume itself torn down meanwhile (its content removed), the bind left.
        fs::remove_dir_all(&volume).unwrap();
        super::super::pod_dir::remove_pod_dir(&pod.dirs, "u1").unwrap();
        assert!(!pod.dirs.pod_dir("u1").exists());
    });
}
