use std::os::unix::fs::PermissionsExt;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::volume_manager::{
    content::{FileProjection, NodeAllocatable, Payload},
    pod_volumes,
};
use serde_json::json;

use super::*;

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
            {"name": "cfg", "mountPath": "/cfg"}, {"name": "creds", "mountPath": "/creds"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "app"}},
                        {"name": "creds", "secret": {"secretName": "s"}}]},
    }))
    .unwrap()
}

fn payload(text: &str, mode: u32) -> Payload {
    Payload::from([(
        "key".to_owned(),
        FileProjection {
            data: text.as_bytes().to_vec(),
            mode,
            fs_user: None,
        },
    )])
}

#[test]
fn api_volumes_are_written_through_the_atomic_writer_and_torn_down_whole() {
    let root = tempfile::tempdir().unwrap();
    let host = DiskVolumeHost::new(PodDirs::new(root.path()));
    let volumes = pod_volumes(&pod()).volumes;
    let allocatable = NodeAllocatable::new();
    for (volume, mode) in volumes.iter().zip([0o644, 0o400]) {
        let content = payload(&volume.name, mode);
        let context = SetUpContext {
            pod_uid: "u1",
            pod_memory_limit: None,
            allocatable: &allocatable,
            content: Some(&content),
            fs_group: None,
        };
        host.set_up(volume, context).unwrap();
        let dir = host.dirs().volume_dir("u1", volume.plugin, &volume.name);
        let file = dir.join("key");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), volume.name);
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            mode
        );
        assert!(
            std::fs::symlink_metadata(dir.join("..data"))
                .unwrap()
                .is_symlink()
        );
        // Idempotent: a second SetUp with the same content writes nothing new.
        host.set_up(volume, context).unwrap();
    }
    let found = host.reconstruct().unwrap();
    assert_eq!(found.mounts.len(), 2);
    for volume in &volumes {
        host.tear_down("u1", &volume.name, volume.plugin).unwrap();
    }
    host.remove_pod_dir("u1").unwrap();
    assert!(!root.path().join("pods/u1").exists());
}

#[test]
fn csi_is_refused_with_the_typed_error_not_faked() {
    let root = tempfile::tempdir().unwrap();
    let host = DiskVolumeHost::new(PodDirs::new(root.path()));
    let mut volume = pod_volumes(&pod()).volumes.remove(0);
    volume.plugin = Plugin::Csi;
    let allocatable = NodeAllocatable::new();
    let error = host
        .set_up(
            &volume,
            SetUpContext {
                pod_uid: "u1",
                pod_memory_limit: None,
                allocatable: &allocatable,
                content: None,
                fs_group: None,
            },
        )
        .unwrap_err();
    assert!(error.message.contains("kubernetes.io/csi"), "{error}");
}

#[test]
fn the_tmpfs_probes_scratch_dir_is_new_and_private_never_a_planted_link() {
    let shared = tempfile::tempdir().unwrap();
    let made = shared.path().join("made");
    create_private_dir(&made).unwrap();
    let meta = std::fs::symlink_metadata(&made).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let elsewhere = tempfile::tempdir().unwrap();
    let planted = shared.path().join("planted");
    std::os::unix::fs::symlink(elsewhere.path(), &planted).unwrap();
    create_private_dir(&planted).expect_err("a planted link is refused");
    create_private_dir(&made).expect_err("an existing directory is refused");
}
