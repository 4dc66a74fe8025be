use std::{collections::BTreeSet, fs};

use tokio::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::volume_manager::{
    DesiredState, Operation, PodVolume, REMOUNT_PERIOD, reconcile,
};
use serde_json::json;

use super::*;
use crate::volume_plugins::{
    atomic_writer::{AtomicWriter, FileProjection, Payload, WriteOutcome},
    csi::layout::staging_path,
    empty_dir::{self, Medium},
    operations::{MemoryBounds, set_up_local, tear_down, wrapper_meta_dir},
    pod_dir::remove_pod_dir,
};

const NODE: &str = "n1";

fn pod(uid: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{uid}"), "namespace": "default", "uid": uid},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "app", "volumeMounts": [
                {"name": "cfg", "mountPath": "/etc/app"},
                {"name": "cache", "mountPath": "/cache"},
            ]}],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "app"}},
                {"name": "cache", "emptyDir": {}},
            ],
        },
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn config_payload() -> Payload {
    Payload::from([(
        "app.conf".to_owned(),
        FileProjection {
            data: b"level=debug\n".to_vec(),
            mode: 0o644,
            fs_user: None,
        },
    )])
}

/// What the configMap source of the next layer will do: the wrapped emptyDir on disk, then the
/// atomic writer.
fn set_up_config_map(dirs: &PodDirs, uid: &str, volume: &PodVolume) -> WriteOutcome {
    let dir = dirs.volume_dir(uid, Plugin::ConfigMap, &volume.name);
    empty_dir::set_up(
        &dir,
        &wrapper_meta_dir(dirs, uid, &volume.name),
        Medium::Disk,
    )
    .unwrap();
    AtomicWriter::new(&dir)
        .unwrap()
        .write(&config_payload())
        .unwrap()
}

/// Runs one pass's operations against the disk and records them in `actual`, as the actor will.
fn apply(dirs: &PodDirs, ops: &[Operation], actual: &mut ActualState) -> Vec<String> {
    let mut log = Vec::new();
    for op in ops {
        match op {
            Operation::Mount { pod_uid, volume } | Operation::Remount { pod_uid, volume } => {
                if volume.plugin == Plugin::ConfigMap {
                    let outcome = set_up_config_map(dirs, pod_uid, volume);
                    log.push(format!("{pod_uid}/{}: {outcome:?}", volume.name));
                } else {
                    set_up_local(dirs, pod_uid, volume, MemoryBounds::default()).unwrap();
                    log.push(format!("{pod_uid}/{}: set up", volume.name));
                }
                actual.mark_mounted(pod_uid, volume, Instant::now());
            }
            Operation::Unmount {
                pod_uid,
                volume,
                plugin,
            } => {
                tear_down(dirs, pod_uid, volume, *plugin).unwrap();
                actual.mark_unmounted(pod_uid, volume);
                log.push(format!("{pod_uid}/{volume}: torn down"));
            }
            Operation::UnmountDevice { unique_name } => {
                panic!("no CSI volume here, yet asked to unstage {unique_name}")
            }
            Operation::RemovePodDir { pod_uid } => match remove_pod_dir(dirs, pod_uid) {
                Ok(()) => {
                    actual.mark_pod_dir_removed(pod_uid);
                    log.push(format!("{pod_uid}: removed"));
                }
                Err(e) => log.push(format!(
                    "{pod_uid}: kept ({})",
                    e.to_string().contains("u4")
                )),
            },
        }
    }
    log
}

fn pass(dirs: &PodDirs, desired: &DesiredState, actual: &mut ActualState) -> Vec<String> {
    let ops = reconcile(
        desired,
        actual,
        &BTreeSet::new(),
        Instant::now(),
        REMOUNT_PERIOD,
    );
    apply(dirs, &ops, actual)
}

fn pod_dirs_on_disk(dirs: &PodDirs) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dirs.pods_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// u1 keeps running, u2 was deleted while mounted, u3 is an empty orphan, u4 holds a volume of
/// a plugin nodepulse does not know.
fn layout_before_restart(dirs: &PodDirs) -> DesiredState {
    let both = [pod("u1"), pod("u2")];
    let before = DesiredState::from_pods(&both, NODE);
    let mut actual = ActualState::default();
    pass(dirs, &before, &mut actual);
    fs::write(
        dirs.volume_dir("u1", Plugin::EmptyDir, "cache")
            .join("warm"),
        b"w",
    )
    .unwrap();
    fs::create_dir_all(dirs.pod_dir("u3").join("containers/app")).unwrap();
    let foreign = dirs.pod_volumes_dir("u4").join("kubernetes.io~nfs/data");
    fs::create_dir_all(&foreign).unwrap();
    fs::write(foreign.join("precious"), b"p").unwrap();
    DesiredState::from_pods(&both[..1], NODE)
}

#[test]
fn a_scan_finds_every_volume_as_uncertain_and_every_pod_dir() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    layout_before_restart(&dirs);
    let found = reconstruct(&dirs).unwrap();
    let mounts: Vec<(&str, &str, Plugin, MountState)> = found
        .actual
        .mounts
        .iter()
        .map(|((uid, vol), m)| (uid.as_str(), vol.as_str(), m.plugin, m.state))
        .collect();
    use MountState::Uncertain;
    assert_eq!(
        mounts,
        [
            ("u1", "cache", Plugin::EmptyDir, Uncertain),
            ("u1", "cfg", Plugin::ConfigMap, Uncertain),
            ("u2", "cache", Plugin::EmptyDir, Uncertain),
            ("u2", "cfg", Plugin::ConfigMap, Uncertain),
        ]
    );
    assert_eq!(
        found.actual.mounts[&("u1".into(), "cfg".into())]
            .unique_name
            .as_str(),
        "kubernetes.io/configmap/u1-cfg"
    );
    assert_eq!(
        found.actual.pod_dirs.iter().collect::<Vec<_>>(),
        ["u1", "u2", "u3", "u4"]
    );
    assert_eq!(
        found.failed,
        [FailedReconstruction {
            pod_uid: "u4".into(),
            plugin_dir: "kubernetes.io~nfs".into(),
            volume: "data".into()
        }]
    );
}

#[test]
fn after_a_restart_nothing_is_mounted_twice_and_nothing_is_forgotten() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let desired = layout_before_restart(&dirs);
    let data_link = dirs
        .volume_dir("u1", Plugin::ConfigMap, "cfg")
        .join("..data");
    let data_dir_before = fs::read_link(&data_link).unwrap();

    // "Restart": a fresh scan, no memory of the run before.
    let mut actual = reconstruct(&dirs).unwrap().actual;
    assert!(
        pass(&dirs, &DesiredState::default(), &mut actual).is_empty(),
        "nothing may be touched before the desired state is populated"
    );
    assert_eq!(
        pass(&dirs, &desired, &mut actual),
        [
            "u2/cache: torn down",
            "u2/cfg: torn down",
            "u1/cache: set up",
            "u1/cfg: Unchanged",
            "u3: removed",
            "u4: kept (true)",
        ]
    );
    // u1's volumes were settled in place: same data directory, cache content kept.
    assert_eq!(fs::read_link(&data_link).unwrap(), data_dir_before);
    let cache = dirs.volume_dir("u1", Plugin::EmptyDir, "cache");
    assert_eq!(fs::read(cache.join("warm")).unwrap(), b"w");

    assert_eq!(
        pass(&dirs, &desired, &mut actual),
        ["u2: removed", "u4: kept (true)"]
    );
    assert_eq!(pod_dirs_on_disk(&dirs), ["u1", "u4"]);
    let precious = dirs
        .pod_volumes_dir("u4")
        .join("kubernetes.io~nfs/data/precious");
    assert_eq!(fs::read(precious).unwrap(), b"p");

    // A second restart finds exactly u1's volumes again and only settles them.
    let mut again = reconstruct(&dirs).unwrap().actual;
    assert_eq!(
        pass(&dirs, &desired, &mut again),
        ["u1/cache: set up", "u1/cfg: Unchanged", "u4: kept (true)"]
    );
}

#[test]
fn a_csi_publish_directory_is_read_back_through_its_vol_data() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let mount = crate::volume_plugins::csi::layout::publish_target(&dirs, "u1", "pv-1");
    fs::create_dir_all(&mount).unwrap();
    let data = std::collections::BTreeMap::from([
        (vol_data::keys::DRIVER_NAME, "d.csi.test".to_owned()),
        (vol_data::keys::VOLUME_HANDLE, "h1".to_owned()),
    ]);
    vol_data::save(&mount, &data).unwrap();
    let broken = crate::volume_plugins::csi::layout::publish_target(&dirs, "u1", "pv-2");
    fs::create_dir_all(&broken).unwrap();

    let found = reconstruct(&dirs).unwrap();
    let mounted = &found.actual.mounts[&("u1".to_owned(), "pv-1".to_owned())];
    assert_eq!(mounted.plugin, Plugin::Csi);
    assert_eq!(
        mounted.unique_name.as_str(),
        "kubernetes.io/csi/d.csi.test^h1"
    );
    assert_eq!(mounted.state, MountState::Uncertain);
    assert!(mounted.attachable, "kept in volumesInUse until adopted");
    let csi = mounted.csi.as_ref().unwrap();
    assert_eq!(
        (
            csi.driver.as_str(),
            csi.volume_handle.as_str(),
            csi.pv_name.as_str()
        ),
        ("d.csi.test", "h1", "pv-1")
    );
    assert_eq!(found.actual.mounts.len(), 1, "pv-2 has no vol_data.json");
    assert_eq!(found.failed.len(), 1);
    assert_eq!(found.failed[0].volume, "pv-2");
}

#[test]
fn a_csi_staging_directory_is_read_back_as_an_uncertain_attachable_device() {
    let root = tempfile::tempdir().unwrap();
    let dirs = PodDirs::new(root.path());
    let save = |driver: &str, handle: &str, named: &str| {
        let staging = staging_path(root.path(), driver, handle);
        fs::create_dir_all(&staging).unwrap();
        let data = std::collections::BTreeMap::from([
            (vol_data::keys::DRIVER_NAME, driver.to_owned()),
            (vol_data::keys::VOLUME_HANDLE, named.to_owned()),
        ]);
        vol_data::save(&staging, &data).unwrap();
    };
    save("d.csi.test", "h1", "h1");
    // A vol_data.json naming another handle than its directory hashes: not taken over.
    save("d.csi.test", "h2", "h-other");
    fs::create_dir_all(staging_path(root.path(), "d.csi.test", "h3")).unwrap();

    let found = reconstruct(&dirs).unwrap();
    let names: Vec<&str> = found.actual.devices.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["kubernetes.io/csi/d.csi.test^h1"]);
    let device = found.actual.devices.values().next().unwrap();
    assert_eq!(device.state, MountState::Uncertain);
    assert!(device.attachable, "in volumesInUse until unstaged");
    assert_eq!(
        (
            device.csi.driver.as_str(),
            device.csi.volume_handle.as_str()
        ),
        ("d.csi.test", "h1")
    );
}
