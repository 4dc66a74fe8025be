//! CSI volumes on a node, against the test CSI plugin (`common/csi_plugin.rs`): the mounter
//! stages and publishes at the kubelet's paths with its `vol_data.json`, passes the volume's
//! attributes on, and on the way back unpublishes, unstages and leaves no directory behind.
//! Nothing here talks to the API server, so it runs unchanged against a real cluster.

use std::{collections::BTreeMap, path::Path};

use nodepulse::volume_plugins::csi::{
    CsiDrivers, CsiMounter, RegisteredDriver,
    layout::{publish_target, staging_path},
};
use nodepulse_actors::{
    ports::{CsiNode, CsiPod, CsiVolume},
    volume_manager::PodDirs,
};
use tonic::Status;

use nodepulse_testkit::csi_plugin::{CsiPlugin, PluginOptions};

const DRIVER: &str = "csi.nodepulse.test";
const NODE: &str = "csi-node-1";

struct Fixture {
    root: tempfile::TempDir,
    plugin: CsiPlugin,
    mounter: CsiMounter,
}

fn fixture(stage: bool) -> Fixture {
    let root = tempfile::tempdir().expect("root dir");
    let options = PluginOptions {
        stage,
        ..PluginOptions::new(DRIVER)
    };
    let plugin = CsiPlugin::start(
        options,
        &root.path().join("plugins").join(DRIVER).join("csi.sock"),
    );
    let drivers = CsiDrivers::default();
    drivers.insert(
        DRIVER,
        RegisteredDriver {
            endpoint: plugin.endpoint.display().to_string(),
            highest_version: "1.0.0".to_owned(),
        },
    );
    let mounter = CsiMounter::new(PodDirs::new(root.path()), drivers);
    Fixture {
        root,
        plugin,
        mounter,
    }
}

fn volume() -> CsiVolume {
    CsiVolume {
        driver: DRIVER.to_owned(),
        volume_handle: "vol-7".to_owned(),
        pv_name: "pv-7".to_owned(),
        read_only: true,
        fs_type: "ext4".to_owned(),
        access_mode: "ReadWriteOnce".to_owned(),
        mount_options: Vec::new(),
        volume_attributes: BTreeMap::from([("tier".to_owned(), "gold".to_owned())]),
        publish_context: BTreeMap::new(),
    }
}

fn pod() -> CsiPod {
    CsiPod {
        uid: "pod-uid-1".to_owned(),
        node_name: NODE.to_owned(),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[tokio::test]
async fn stage_and_publish_use_the_kubelets_paths_and_volume_data() {
    let f = fixture(true);
    let staged = f.mounter.mount_device(volume()).await.expect("staged");
    let staging = staging_path(f.root.path(), DRIVER, "vol-7");
    assert_eq!(staged.as_deref(), Some(staging.as_path()));
    assert_eq!(read(&staging.join("staged")), "vol-7");
    assert_eq!(
        read(&staging.parent().expect("parent").join("vol_data.json")),
        r#"{"driverName":"csi.nodepulse.test","volumeHandle":"vol-7"}"#
    );

    let target = f.mounter.set_up(pod(), volume()).await.expect("published");
    assert_eq!(
        target,
        publish_target(&PodDirs::new(f.root.path()), "pod-uid-1", "pv-7")
    );
    assert!(target.ends_with("pods/pod-uid-1/volumes/kubernetes.io~csi/pv-7/mount"));
    assert_eq!(read(&target.join("published")), "vol-7");
    let attachment = nodepulse::volume_plugins::csi::layout::attachment_name("vol-7", DRIVER, NODE);
    assert_eq!(
        read(&target.parent().expect("parent").join("vol_data.json")),
        format!(
            r#"{{"attachmentID":"{attachment}","driverName":"csi.nodepulse.test","nodeName":"csi-node-1","specVolID":"pv-7","volumeHandle":"vol-7","volumeLifecycleMode":"Persistent"}}"#
        )
    );

    let publish = f
        .plugin
        .calls()
        .into_iter()
        .find(|call| call.method == "NodePublishVolume")
        .expect("a publish call");
    assert_eq!(publish.staging_path, staging.display().to_string());
    assert_eq!(publish.target_path, target.display().to_string());
    assert!(publish.read_only);
    assert_eq!(publish.fs_type, "ext4");
    assert_eq!(
        publish.volume_context.get("tier").map(String::as_str),
        Some("gold")
    );
}

#[tokio::test]
async fn unpublish_then_unstage_leave_no_directory_behind() {
    let f = fixture(true);
    f.mounter.mount_device(volume()).await.expect("staged");
    let target = f.mounter.set_up(pod(), volume()).await.expect("published");
    f.mounter
        .tear_down("pod-uid-1".to_owned(), volume())
        .await
        .expect("unpublished");
    assert!(
        !target.parent().expect("parent").exists(),
        "publish dir removed"
    );
    f.mounter.unmount_device(volume()).await.expect("unstaged");
    let staging = staging_path(f.root.path(), DRIVER, "vol-7");
    assert!(
        !staging.parent().expect("parent").exists(),
        "staging dir removed"
    );
    assert_eq!(
        f.plugin.volume_calls(),
        [
            "NodeStageVolume",
            "NodePublishVolume",
            "NodeUnpublishVolume",
            "NodeUnstageVolume"
        ]
    );
}

#[tokio::test]
async fn a_driver_that_does_not_stage_is_published_without_a_staging_path() {
    let f = fixture(false);
    assert_eq!(
        f.mounter
            .mount_device(volume())
            .await
            .expect("mount device"),
        None
    );
    f.mounter.set_up(pod(), volume()).await.expect("published");
    f.mounter
        .tear_down("pod-uid-1".to_owned(), volume())
        .await
        .expect("unpublished");
    f.mounter
        .unmount_device(volume())
        .await
        .expect("unmount device");
    assert_eq!(
        f.plugin.volume_calls(),
        ["NodePublishVolume", "NodeUnpublishVolume"]
    );
    let publish = &f.plugin.calls()[..]
        .iter()
        .find(|call| call.method == "NodePublishVolume")
        .cloned()
        .expect("publish");
    assert_eq!(publish.staging_path, "");
    let staging = staging_path(f.root.path(), DRIVER, "vol-7");
    assert!(
        !staging.parent().expect("parent").exists(),
        "volume data removed"
    );
}

#[tokio::test]
async fn a_failed_publish_passes_the_drivers_error_on_and_removes_the_directory() {
    let f = fixture(false);
    f.plugin
        .fail("NodePublishVolume", Status::internal("disk on fire"));
    let error = f.mounter.set_up(pod(), volume()).await.expect_err("fails");
    assert_eq!(
        error.to_string(),
        "rpc error: code = Internal desc = disk on fire"
    );
    let target = publish_target(&PodDirs::new(f.root.path()), "pod-uid-1", "pv-7");
    assert!(
        !target.parent().expect("parent").exists(),
        "nothing left behind"
    );
}

#[tokio::test]
async fn an_unregistered_driver_is_named_as_the_kubelet_names_it() {
    let f = fixture(true);
    let other = CsiVolume {
        driver: "other.example.com".to_owned(),
        ..volume()
    };
    let error = f.mounter.set_up(pod(), other).await.expect_err("fails");
    assert_eq!(
        error.to_string(),
        "kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name other.example.com not found in the list of registered CSI drivers"
    );
    assert!(f.plugin.calls().is_empty());
}
