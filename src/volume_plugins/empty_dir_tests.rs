use std::{fs, os::unix::fs::PermissionsExt, path::Path};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::volume_plugins::mount::mount_count;

const MI: u64 = 1024 * 1024;

fn source(medium: &str, size_limit: Option<&str>) -> EmptyDirVolumeSource {
    EmptyDirVolumeSource {
        medium: Some(medium.to_owned()),
        size_limit: size_limit.map(|s| Quantity(s.to_owned())),
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_medium_and_tmpfs_size_follow_the_kubelet() {
    let gi = Some(1024 * MI);
    let table = [
        (source("", None), gi, None, Medium::Disk),
        (
            source("Memory", Some("64Mi")),
            gi,
            None,
            Medium::Memory {
                size_bytes: Some(64 * MI),
            },
        ),
        (
            source("Memory", None),
            gi,
            Some(128 * MI),
            Medium::Memory {
                size_bytes: Some(128 * MI),
            },
        ),
        // A zero bound is no bound.
        (
            source("Memory", Some("0")),
            None,
            None,
            Medium::Memory { size_bytes: None },
        ),
    ];
    for (source, node, pod, want) in table {
        assert_eq!(medium_of(&source, node, pod).unwrap(), want, "{source:?}");
    }
}

#[test]
fn unknown_and_hugepages_media_are_typed_errors() {
    let err = medium_of(&source("Floppy", None), None, None).unwrap_err();
    assert_eq!(err.to_string(), "unknown storage medium \"Floppy\"");
    let err = medium_of(&source("HugePages-2Mi", None), None, None).unwrap_err();
    assert!(
        matches!(err, EmptyDirError::HugePagesUnsupported(_)),
        "{err}"
    );
    let err = medium_of(&source("Memory", Some("lots")), None, None).unwrap_err();
    assert_eq!(err.to_string(), "invalid sizeLimit \"lots\"");
}

#[test]
fn a_disk_empty_dir_is_0777_with_a_ready_file_and_survives_a_second_setup() {
    let root = tempfile::tempdir().unwrap();
    let volume = root.path().join("volumes/kubernetes.io~empty-dir/cache");
    let meta = root.path().join("plugins/kubernetes.io~empty-dir/cache");
    set_up(&volume, &meta, Medium::Disk).unwrap();
    assert_eq!(mode(&volume), 0o777);
    assert_eq!(mode(&meta), 0o750);
    assert!(is_ready(&meta));

    fs::write(volume.join("data"), b"kept").unwrap();
    set_up(&volume, &meta, Medium::Disk).unwrap();
    assert_eq!(fs::read(volume.join("data")).unwrap(), b"kept");
}

#[test]
fn tear_down_removes_the_volume_and_its_metadata_and_is_idempotent() {
    let root = tempfile::tempdir().unwrap();
    let volume = root.path().join("v");
    let meta = root.path().join("m");
    set_up(&volume, &meta, Medium::Disk).unwrap();
    fs::create_dir_all(volume.join("deep/er")).unwrap();
    fs::write(volume.join("deep/er/file"), b"x").unwrap();
    tear_down(&volume, &meta).unwrap();
    assert!(!volume.exists() && !meta.exists());
    tear_down(&volume, &meta).unwrap();
}

/// In a private mount namespace when the process may create one; otherwise the typed error
/// must say so, which is what a pod with `medium: Memory` gets on such a host.
#[test]
fn a_memory_empty_dir_is_one_sized_tmpfs_and_tears_down_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let volume = root.path().join("volumes/kubernetes.io~empty-dir/shm");
    let meta = root.path().join("plugins/kubernetes.io~empty-dir/shm");
    let medium = Medium::Memory {
        size_bytes: Some(MI),
    };
    let outcome = in_private_mount_namespace(|| {
        set_up(&volume, &meta, medium).unwrap();
        assert!(is_tmpfs_mount_point(&volume).unwrap());
        let fs = rustix::fs::statfs(&volume).unwrap();
        assert_eq!(fs.f_blocks as u64 * fs.f_bsize as u64, MI);
        fs::write(volume.join("in-memory"), b"x").unwrap();
        set_up(&volume, &meta, medium).unwrap();
        assert_eq!(
            mount_count(&volume).unwrap(),
            1,
            "a second tmpfs was stacked"
        );
        assert_eq!(fs::read(volume.join("in-memory")).unwrap(), b"x");
        tear_down(&volume, &meta).unwrap();
        assert_eq!(mount_count(&volume).unwrap(), 0);
    });
    match outcome {
        Ok(()) => assert!(!volume.exists() && !meta.exists()),
        Err(e) => {
            let err = probe_memory_medium(root.path()).unwrap_err();
            assert!(
                matches!(err, EmptyDirError::MemoryMediumUnavailable { .. }),
                "{e}: {err}"
            );
        }
    }
}

#[test]
fn the_memory_medium_probe_agrees_with_a_real_mount_attempt() {
    let root = tempfile::tempdir().unwrap();
    let probe = probe_memory_medium(root.path());
    let real = in_private_mount_namespace(|| {
        let target = root.path().join("real");
        fs::create_dir(&target).unwrap();
        mount_tmpfs(&target, Some(4096))
    });
    assert_eq!(probe.is_ok(), matches!(real, Ok(Ok(()))), "{probe:?}");
    if let Err(err) = probe {
        assert!(err.to_string().starts_with(
            "emptyDir medium Memory needs a tmpfs mount and nodepulse may not mount here"
        ));
    }
    // The probe leaves nothing behind.
    assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
}
