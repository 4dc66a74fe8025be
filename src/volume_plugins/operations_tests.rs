use std::{fs, os::unix::fs::PermissionsExt};

use nodepulse_actors::volume_manager::UniqueVolumeName;
use serde_json::json;

use super::*;

fn volume(name: &str, plugin: Plugin, spec: serde_json::Value) -> PodVolume {
    PodVolume {
        name: name.to_owned(),
        plugin,
        unique_name: UniqueVolumeName::pod_scoped(plugin, "u1", name),
        attachable: false,
        spec: serde_json::from_value::<k8s_openapi::api::core::v1::Volume>(spec)
            .unwrap()
            .into(),
        csi: None,
    }
}

#[test]
fn an_empty_dir_is_set_up_at_the_kubelets_path_and_torn_down() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let cache = volume(
        "cache",
        Plugin::EmptyDir,
        json!({"name": "cache", "emptyDir": {}}),
    );
    set_up_local(&dirs, "u1", &cache, MemoryBounds::default()).unwrap();
    let dir = root
        .path()
        .join("pods/u1/volumes/kubernetes.io~empty-dir/cache");
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o777
    );
    assert!(
        root.path()
            .join("pods/u1/plugins/kubernetes.io~empty-dir/cache/ready")
            .is_file()
    );

    tear_down(&dirs, "u1", "cache", Plugin::EmptyDir).unwrap();
    assert!(!dir.exists());
    assert!(
        !root
            .path()
            .join("pods/u1/plugins/kubernetes.io~empty-dir/cache")
            .exists()
    );
}

#[test]
fn a_host_path_is_checked_and_its_teardown_leaves_the_host_alone() {
    let host = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(host.path().join("root"));
    let path = host.path().join("logs").display().to_string();
    let logs = volume(
        "logs",
        Plugin::HostPath,
        json!({"name": "logs", "hostPath": {"path": path, "type": "DirectoryOrCreate"}}),
    );
    set_up_local(&dirs, "u1", &logs, MemoryBounds::default()).unwrap();
    assert!(host.path().join("logs").is_dir());
    tear_down(&dirs, "u1", "logs", Plugin::HostPath).unwrap();
    assert!(host.path().join("logs").is_dir());

    let file = volume(
        "f",
        Plugin::HostPath,
        json!({"name": "f", "hostPath": {"path": path, "type": "File"}}),
    );
    let err = set_up_local(&dirs, "u1", &file, MemoryBounds::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("hostPath type check failed: {path} is not a file")
    );
}

#[test]
fn an_image_volume_is_set_up_and_torn_down_without_touching_the_disk() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let kitten = volume(
        "kitten",
        Plugin::Image,
        json!({"name": "kitten", "image": {"reference": "r/kitten:1"}}),
    );
    set_up_local(&dirs, "u1", &kitten, MemoryBounds::default()).unwrap();
    tear_down(&dirs, "u1", "kitten", Plugin::Image).unwrap();
    assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn api_backed_volumes_are_refused_not_faked() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let cfg = volume(
        "cfg",
        Plugin::ConfigMap,
        json!({"name": "cfg", "configMap": {"name": "a"}}),
    );
    let err = set_up_local(&dirs, "u1", &cfg, MemoryBounds::default()).unwrap_err();
    assert!(
        matches!(
            err,
            VolumeOpError::NotLocal {
                plugin: Plugin::ConfigMap
            }
        ),
        "{err}"
    );
    assert!(!root.path().join("pods").exists());
}

#[test]
fn a_secret_volume_teardown_removes_its_content_and_wrapper_metadata() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let dir = dirs.volume_dir("u1", Plugin::Secret, "creds");
    let meta = wrapper_meta_dir(&dirs, "u1", "creds");
    empty_dir::set_up(&dir, &meta, empty_dir::Medium::Disk).unwrap();
    fs::write(dir.join("password"), b"hunter2").unwrap();
    tear_down(&dirs, "u1", "creds", Plugin::Secret).unwrap();
    assert!(!dir.exists() && !meta.exists());
}
