use std::{collections::BTreeSet, sync::Arc, time::Duration};

use serde_json::json;

use super::*;
use crate::volume_manager::{
    fixtures::{pod, pod_with_cfg_and_cache},
    state::DesiredState,
};

fn ops_summary(ops: &[Operation]) -> Vec<String> {
    ops.iter()
        .map(|op| match op {
            Operation::Mount { pod_uid, volume } => format!("mount {pod_uid}/{}", volume.name),
            Operation::Remount { pod_uid, volume } => format!("remount {pod_uid}/{}", volume.name),
            Operation::Unmount {
                pod_uid, volume, ..
            } => format!("unmount {pod_uid}/{volume}"),
            Operation::UnmountDevice { unique_name } => format!("unstage {unique_name}"),
            Operation::RemovePodDir { pod_uid } => format!("rmdir {pod_uid}"),
        })
        .collect()
}

fn run(desired: &DesiredState, actual: &ActualState, now: Instant) -> Vec<String> {
    ops_summary(&reconcile(
        desired,
        actual,
        &BTreeSet::new(),
        now,
        REMOUNT_PERIOD,
    ))
}

/// The actual state after every desired volume was mounted at `at`.
fn all_mounted(desired: &DesiredState, at: Instant) -> ActualState {
    let mut actual = ActualState::default();
    for (uid, pod) in &desired.pods {
        for volume in pod.volumes.values() {
            actual.mark_mounted(uid, volume, at);
        }
    }
    actual
}

#[test]
fn new_pod_gets_every_volume_mounted_once() {
    let now = Instant::now();
    let desired = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    assert_eq!(
        run(&desired, &ActualState::default(), now),
        ["mount u1/cache", "mount u1/cfg"]
    );
    assert!(run(&desired, &all_mounted(&desired, now), now).is_empty());
}

#[test]
fn pods_of_other_nodes_and_terminated_pods_are_not_desired() {
    let mut done = pod_with_cfg_and_cache("u2", "n1");
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let pods = [
        pod_with_cfg_and_cache("u1", "other"),
        done,
        pod_with_cfg_and_cache("u3", "n1"),
    ];
    let desired = DesiredState::from_pods(&pods, "n1");
    assert_eq!(desired.pods.keys().collect::<Vec<_>>(), ["u3"]);
}

#[test]
fn only_atomic_writer_volumes_are_remounted_after_the_sync_period() {
    let start = Instant::now();
    let desired = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    let actual = all_mounted(&desired, start);
    let just_before = start + REMOUNT_PERIOD - Duration::from_millis(1);
    assert!(run(&desired, &actual, just_before).is_empty());
    assert_eq!(
        run(&desired, &actual, start + REMOUNT_PERIOD),
        ["remount u1/cfg"]
    );
}

#[test]
fn a_terminated_pod_is_unmounted_then_its_directory_removed() {
    let now = Instant::now();
    let running = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    let mut actual = all_mounted(&running, now);
    let gone = DesiredState::from_pods(&[], "n1");
    assert_eq!(
        run(&gone, &actual, now),
        ["unmount u1/cache", "unmount u1/cfg"]
    );
    actual.mark_unmounted("u1", "cache");
    assert_eq!(run(&gone, &actual, now), ["unmount u1/cfg"]);
    actual.mark_unmounted("u1", "cfg");
    assert_eq!(run(&gone, &actual, now), ["rmdir u1"]);
    actual.mark_pod_dir_removed("u1");
    assert!(run(&gone, &actual, now).is_empty());
}

#[test]
fn nothing_is_unmounted_before_the_desired_state_is_populated() {
    let now = Instant::now();
    let running = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    let actual = all_mounted(&running, now);
    let mut orphan_dir = actual.clone();
    orphan_dir.pod_dirs.insert("u-orphan".into());
    assert!(run(&DesiredState::default(), &orphan_dir, now).is_empty());
}

#[test]
fn a_volume_another_pod_still_needs_is_never_unmounted() {
    let now = Instant::now();
    let both = [
        pod_with_cfg_and_cache("u1", "n1"),
        pod_with_cfg_and_cache("u2", "n1"),
    ];
    let actual = all_mounted(&DesiredState::from_pods(&both, "n1"), now);
    let only_u2 = DesiredState::from_pods(&both[1..], "n1");
    assert_eq!(
        run(&only_u2, &actual, now),
        ["unmount u1/cache", "unmount u1/cfg"]
    );
}

#[test]
fn a_dropped_volume_of_a_still_running_pod_is_unmounted_but_its_dir_stays() {
    let now = Instant::now();
    let before = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    let actual = all_mounted(&before, now);
    let after = DesiredState::from_pods(
        &[pod("u1", "n1", json!([{"name": "cache", "emptyDir": {}}]))],
        "n1",
    );
    assert_eq!(run(&after, &actual, now), ["unmount u1/cfg"]);
}

#[test]
fn uncertain_mounts_are_set_up_again_and_refreshed_ones_only_remounted() {
    let now = Instant::now();
    let desired = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
    let mut actual = all_mounted(&desired, now);
    for mounted in actual.mounts.values_mut() {
        mounted.state = MountState::Uncertain;
        mounted.set_up_at = None;
    }
    assert_eq!(
        run(&desired, &actual, now),
        ["mount u1/cache", "mount u1/cfg"]
    );
    // Reconstructed and certain: content-refreshing plugins are rewritten once, others left.
    for mounted in actual.mounts.values_mut() {
        mounted.state = MountState::Mounted;
    }
    assert_eq!(run(&desired, &actual, now), ["remount u1/cfg"]);
}

fn attachable_pod_volume(uid: &str) -> (DesiredState, UniqueVolumeName) {
    let mut desired = DesiredState::from_pods(
        &[pod(uid, "n1", json!([{"name": "data", "emptyDir": {}}]))],
        "n1",
    );
    // As the PVC resolver of the next layer will: a CSI volume the controller attaches.
    let unique = UniqueVolumeName::attachable(Plugin::Csi, "drv^vol-1");
    let volume = desired
        .pods
        .get_mut(uid)
        .map(Arc::make_mut)
        .unwrap()
        .volumes
        .get_mut("data")
        .unwrap();
    volume.plugin = Plugin::Csi;
    volume.attachable = true;
    volume.unique_name = unique.clone();
    (desired, unique)
}

#[test]
fn an_attachable_volume_waits_for_volumes_attached() {
    let now = Instant::now();
    let (desired, unique) = attachable_pod_volume("u1");
    let none = BTreeSet::new();
    let attached = BTreeSet::from([unique]);
    let actual = ActualState::default();
    assert!(reconcile(&desired, &actual, &none, now, REMOUNT_PERIOD).is_empty());
    assert_eq!(
        ops_summary(&reconcile(
            &desired,
            &actual,
            &attached,
            now,
            REMOUNT_PERIOD
        )),
        ["mount u1/data"]
    );
}

#[test]
fn volumes_in_use_waits_for_the_first_sync_and_lists_attachable_volumes_only() {
    let now = Instant::now();
    let (mut desired, unique) = attachable_pod_volume("u1");
    let plain = DesiredState::from_pods(&[pod_with_cfg_and_cache("u2", "n1")], "n1");
    desired.pods.extend(plain.pods);
    let actual = all_mounted(&desired, now);
    assert_eq!(volumes_in_use(&desired, &actual, false), None);
    assert_eq!(
        volumes_in_use(&desired, &actual, true),
        Some(vec![unique.clone()])
    );
    // Out of the desired state but still mounted: still in use, so the controller waits.
    let gone = DesiredState::from_pods(&[], "n1");
    assert_eq!(volumes_in_use(&gone, &actual, true), Some(vec![unique]));
    assert_eq!(
        volumes_in_use(&gone, &ActualState::default(), true),
        Some(vec![])
    );
}

mod staged_devices {
    use super::*;
    use crate::{
        ports::CsiVolume,
        volume_manager::{MountState, StagedDevice},
    };

    /// `unique` staged for the node, as reconstruction reads a staging directory back.
    fn staged(unique: &UniqueVolumeName) -> ActualState {
        let mut actual = ActualState::default();
        actual.devices.insert(
            unique.clone(),
            StagedDevice {
                csi: CsiVolume::default(),
                attachable: true,
                state: MountState::Uncertain,
            },
        );
        actual
    }

    #[test]
    fn a_device_no_pod_uses_or_wants_is_unstaged_once_the_pod_list_is_complete() {
        let now = Instant::now();
        let (_, unique) = attachable_pod_volume("u1");
        let actual = staged(&unique);
        let mut unlisted = DesiredState::from_pods(&[], "n1");
        unlisted.populated = false;
        assert!(
            run(&unlisted, &actual, now).is_empty(),
            "a pod not seen yet may want it"
        );
        let claiming = DesiredState::from_pods(
            &[pod(
                "u2",
                "n1",
                json!([{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]),
            )],
            "n1",
        );
        assert!(
            run(&claiming, &actual, now)
                .iter()
                .all(|op| !op.starts_with("unstage")),
            "an unresolved claim may name it"
        );
        let listed = DesiredState::from_pods(&[], "n1");
        assert_eq!(run(&listed, &actual, now), [format!("unstage {unique}")]);
        // Staged and unused: in use until unstaged, so the controller does not detach it.
        assert_eq!(volumes_in_use(&listed, &actual, true), Some(vec![unique]));
    }

    #[test]
    fn a_device_a_pod_wants_or_has_published_stays_staged() {
        let now = Instant::now();
        let (desired, unique) = attachable_pod_volume("u1");
        let mut actual = all_mounted(&desired, now);
        actual.devices = staged(&unique).devices;
        assert!(run(&desired, &actual, now).is_empty());
        let gone = DesiredState::from_pods(&[], "n1");
        assert_eq!(
            run(&gone, &actual, now),
            ["unmount u1/data"],
            "unpublished first; unstaged by a later pass"
        );
    }
}

mod csi_adoption {
    use super::*;
    use crate::{
        ports::CsiVolume,
        volume_manager::ResolvedClaim,
        volume_manager::{MountState, MountedVolume, ResolvedClaims, csi_unique_name},
    };

    fn csi_volume() -> CsiVolume {
        CsiVolume {
            driver: "d.csi.test".into(),
            volume_handle: "h1".into(),
            pv_name: "pv-1".into(),
            ..CsiVolume::default()
        }
    }

    /// A CSI mount as reconstruction reads it back: keyed by its PV's directory.
    fn read_back() -> ActualState {
        let mut actual = ActualState::default();
        actual.pod_dirs.insert("u1".into());
        actual.mounts.insert(
            ("u1".into(), "pv-1".into()),
            MountedVolume {
                plugin: Plugin::Csi,
                unique_name: csi_unique_name(&csi_volume()),
                attachable: true,
                state: MountState::Uncertain,
                set_up_at: None,
                csi: Some(Arc::new(csi_volume())),
            },
        );
        actual
    }

    fn arcs(pods: Vec<k8s_openapi::api::core::v1::Pod>) -> Vec<crate::kept_pod::KeptPod> {
        pods.into_iter()
            .map(crate::kept_pod::KeptPod::from)
            .collect()
    }

    fn claim_pods() -> Vec<k8s_openapi::api::core::v1::Pod> {
        vec![pod(
            "u1",
            "n1",
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]),
        )]
    }

    fn resolved(attachable: bool) -> ResolvedClaims {
        let claim = ResolvedClaim {
            volume: Arc::new(csi_volume()),
            unique_name: csi_unique_name(&csi_volume()),
            attachable,
        };
        [(("u1".to_owned(), "data".to_owned()), Ok(claim))].into()
    }

    #[test]
    fn a_read_back_csi_mount_waits_for_its_pods_claim_then_is_adopted_not_remounted_twice() {
        let now = Instant::now();
        let actual = read_back();
        let unresolved = DesiredState::from_pods(&claim_pods(), "n1");
        assert_eq!(run(&unresolved, &actual, now), Vec::<String>::new());

        let desired = DesiredState::from_pods_with(&arcs(claim_pods()), "n1", &resolved(false));
        let mut adopted = actual.clone();
        adopted.adopt_csi(&desired);
        let keys: Vec<_> = adopted.mounts.keys().cloned().collect();
        assert_eq!(keys, [("u1".to_owned(), "data".to_owned())]);
        assert!(
            !adopted.mounts[&keys[0]].attachable,
            "the claim's driver says"
        );
        // Uncertain: its idempotent SetUp runs again; nothing is unpublished.
        assert_eq!(run(&desired, &adopted, now), ["mount u1/data"]);
    }

    #[test]
    fn a_read_back_duplicate_of_a_known_mount_is_dropped() {
        let desired = DesiredState::from_pods_with(&arcs(claim_pods()), "n1", &resolved(true));
        let mut actual = all_mounted(&desired, Instant::now());
        actual.mounts.extend(read_back().mounts);
        actual.adopt_csi(&desired);
        let keys: Vec<_> = actual.mounts.keys().cloned().collect();
        assert_eq!(keys, [("u1".to_owned(), "data".to_owned())]);
        assert_eq!(actual.mounts[&keys[0]].state, MountState::Mounted);
    }

    #[test]
    fn a_read_back_csi_mount_of_a_gone_pod_is_unmounted() {
        let mut actual = read_back();
        let gone = DesiredState::from_pods(&[], "n1");
        actual.adopt_csi(&gone);
        assert_eq!(run(&gone, &actual, Instant::now()), ["unmount u1/pv-1"]);
    }
}
