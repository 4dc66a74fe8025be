//! VolumeManagerActor's CSI half against the in-memory CSI world on paused tokio time: an
//! attachable claim is in `volumesInUse` but not staged before `volumesAttached` lists it, then
//! staged once and published per pod; a deleted pod's volume is unpublished, the last user's
//! unstaged, and only then leaves `volumesInUse`; a missing claim is the pod's error until it
//! appears.

use crate::kept_pod::KeptPod;
use std::{sync::Arc, time::Duration};

use actix::{Actor, Addr};
use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::{Kept, Recipient};
use tokio::sync::mpsc;

use super::{
    CsiPorts, MountReadiness, PodDirs, VolumeManagerActor, VolumeManagerMemory, VolumeManagerPeers,
    VolumeManagerSettings, VolumeView, actor_tests::Fakes, fixtures::pod,
};
use crate::volume_manager::{ActualState, MountState, StagedDevice, csi_unique_name};
use crate::{
    messages::{NodeVolumeFacts, VolumesInUse},
    ports::{CsiVolume, PodWatchEvent, fakes::eventually},
    volume_manager::{
        PodVolumeView,
        ports::fakes::csi::{FakeCsi, Log},
    },
};

const UNIQUE: &str = "kubernetes.io/csi/d.csi.test^h-data";

struct Node {
    fakes: Fakes,
    csi: FakeCsi,
    log: Log,
    watch: mpsc::UnboundedSender<PodWatchEvent>,
    view: VolumeView,
    actor: Addr<VolumeManagerActor>,
}

impl Node {
    fn logged(&self, line: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l == line)
    }

    /// Position of the first log line equal to `line`.
    fn position(&self, line: &str) -> usize {
        let log = self.log.lock().unwrap();
        log.iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("{line:?} not in {log:?}"))
    }

    /// Position of the last log line equal to `line`.
    fn last_position(&self, line: &str) -> Option<usize> {
        self.log.lock().unwrap().iter().rposition(|l| l == line)
    }

    fn attach(&self, names: &[&str]) {
        self.actor.do_send(NodeVolumeFacts {
            volumes_attached: names.iter().map(|n| (*n).to_owned()).collect(),
            allocatable: Default::default(),
        });
    }
}

fn start(attach_required: bool) -> Node {
    start_with(attach_required, Fakes::default())
}

fn start_with(attach_required: bool, fakes: Fakes) -> Node {
    let log = Log::default();
    let csi = FakeCsi::new(Arc::clone(&log), attach_required);
    csi.claims.lock().unwrap().insert("data".into());
    let (watch, receiver) = mpsc::unbounded_channel();
    *fakes.watch.lock().unwrap() = Some(receiver);
    let memory = Kept::<VolumeManagerMemory>::default();
    let sink = Arc::clone(&log);
    let peers = VolumeManagerPeers {
        node_status: Some(Recipient::from_fn(move |VolumesInUse(list)| {
            sink.lock().unwrap().push(format!("in use {list:?}"));
            Ok(())
        })),
        pod_lifecycle: None,
    };
    let dirs = PodDirs::new("/var/lib/kubelet");
    let settings = VolumeManagerSettings {
        node_name: "n1".into(),
        dirs: dirs.clone(),
        sync_period: Duration::from_secs(60),
        fetches_at_once: None,
    };
    let ports = CsiPorts {
        storage: Arc::new(csi.clone()),
        node: Arc::new(csi.clone()),
    };
    let actor = VolumeManagerActor::new(
        settings,
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        memory.clone(),
        peers,
    )
    .with_csi(ports)
    .start();
    Node {
        fakes,
        csi,
        log,
        watch,
        view: VolumeView::new(memory, "n1".into(), dirs),
        actor,
    }
}

fn claim_pod(uid: &str) -> Pod {
    pod(
        uid,
        "n1",
        serde_json::json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
    )
}

const BUDGET: Duration = Duration::from_secs(30);

#[actix_rt::test]
async fn an_attachable_claim_is_in_use_but_not_staged_until_attached_then_staged_once() {
    tokio::time::pause();
    let node = start(true);
    for uid in ["u1", "u2"] {
        node.watch
            .send(PodWatchEvent::Applied(KeptPod::from(claim_pod(uid))))
            .unwrap();
    }
    node.watch.send(PodWatchEvent::Listed).unwrap();
    let in_use = format!("in use Some([{UNIQUE:?}])");
    eventually("the volume in volumesInUse", BUDGET, || {
        node.logged(&in_use)
    })
    .await;
    // The attach/detach controller has not attached it: nothing may touch it for a while.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(node.csi.calls().is_empty(), "{:?}", node.csi.calls());
    let MountReadiness::Waiting(waiting) = node.view.readiness("u1") else {
        panic!("u1 waits for its volume");
    };
    assert_eq!(waiting.unattached, ["data"]);

    node.attach(&[UNIQUE]);
    eventually("both pods ready", BUDGET, || {
        ["u1", "u2"]
            .iter()
            .all(|uid| node.view.readiness(uid) == MountReadiness::Ready)
    })
    .await;
    let mut calls = node.csi.calls();
    assert_eq!(calls.remove(0), "stage h-data", "staged first, once");
    calls.sort();
    assert_eq!(
        calls,
        [
            "publish u1 h-data /dev/h-data",
            "publish u2 h-data /dev/h-data"
        ],
        "published per pod with the attachment's publish context"
    );
    let path = node.view.host_paths("u1")["data"].clone();
    assert_eq!(
        path.to_str().unwrap(),
        "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-data/mount"
    );
}

#[actix_rt::test]
async fn a_deleted_pods_volume_is_unpublished_and_unstaged_before_it_leaves_volumes_in_use() {
    tokio::time::pause();
    let node = start(true);
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    node.attach(&[UNIQUE]);
    eventually("u1 ready", BUDGET, || {
        node.view.readiness("u1") == MountReadiness::Ready
    })
    .await;

    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    let in_use = format!("in use Some([{UNIQUE:?}])");
    eventually("volumesInUse emptied", BUDGET, || {
        node.last_position("in use Some([])") > node.last_position(&in_use)
    })
    .await;
    let unpublished = node.position("unpublish u1 h-data");
    let unstaged = node.position("unstage h-data");
    let cleared = node.last_position("in use Some([])").unwrap();
    assert!(
        unpublished < node.position("begin unstage h-data") && unstaged < cleared,
        "{:?}",
        node.log.lock().unwrap()
    );
}

#[actix_rt::test]
async fn a_volume_another_pod_uses_stays_staged() {
    tokio::time::pause();
    let node = start(false);
    for uid in ["u1", "u2"] {
        node.watch
            .send(PodWatchEvent::Applied(KeptPod::from(claim_pod(uid))))
            .unwrap();
    }
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("both pods ready without any attach", BUDGET, || {
        ["u1", "u2"]
            .iter()
            .all(|uid| node.view.readiness(uid) == MountReadiness::Ready)
    })
    .await;
    // Not attachable: never in volumesInUse.
    assert!(!node.logged(&format!("in use Some([{UNIQUE:?}])")));
    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    eventually("u1 unpublished", BUDGET, || {
        node.logged("unpublish u1 h-data")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!node.logged("begin unstage h-data"), "u2 still uses it");
    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(claim_pod("u2"))))
        .unwrap();
    eventually("unstaged after the last user", BUDGET, || {
        node.logged("unstage h-data")
    })
    .await;
}

#[actix_rt::test]
async fn a_missing_claim_is_the_pods_error_until_it_appears() {
    tokio::time::pause();
    let node = start(false);
    node.csi.claims.lock().unwrap().clear();
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("the pod's FailedMount event", BUDGET, || {
        !node.fakes.events().is_empty()
    })
    .await;
    let (_, event) = node.fakes.events()[0].clone();
    assert_eq!(event.reason, "FailedMount");
    assert!(
        event.message.ends_with(
            "error processing PVC default/data: failed to fetch PVC from API server: persistentvolumeclaims \"data\" not found"
        ),
        "{}",
        event.message
    );
    assert!(matches!(
        node.view.readiness("u1"),
        MountReadiness::PodErrors(_)
    ));
    // Looked up again CLAIM_RETRY after the last lookup answered, not in a loop.
    let lookups = node.csi.claim_lookups();
    tokio::time::sleep(super::CLAIM_RETRY * 5).await;
    let more = node.csi.claim_lookups() - lookups;
    assert!(
        (3..=4).contains(&more),
        "{more} lookups in 10 s (a 1 s lookup every 2 s)"
    );
    node.csi.claims.lock().unwrap().insert("data".into());
    eventually("ready once the claim exists", BUDGET, || {
        node.view.readiness("u1") == MountReadiness::Ready
    })
    .await;
    assert_eq!(node.csi.calls()[0], "stage h-data");
}

/// Reconstruction's view of a node restarted between a pod's unpublish and its unstage: the
/// volume staged, no pod's publish directory left.
fn staged_on_disk() -> ActualState {
    let csi = CsiVolume {
        driver: "d.csi.test".into(),
        volume_handle: "h-data".into(),
        ..CsiVolume::default()
    };
    let mut actual = ActualState::default();
    actual.devices.insert(
        csi_unique_name(&csi),
        StagedDevice {
            csi,
            attachable: true,
            state: MountState::Uncertain,
        },
    );
    actual
}

#[actix_rt::test]
async fn a_device_found_staged_at_start_stays_in_use_until_unstaged() {
    tokio::time::pause();
    let fakes = Fakes::default();
    fakes.set_on_disk(staged_on_disk());
    let node = start_with(true, fakes);
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("volumesInUse emptied", BUDGET, || {
        node.logged("in use Some([])")
    })
    .await;
    let in_use = node.position(&format!("in use Some([{UNIQUE:?}])"));
    let unstaged = node.position("unstage h-data");
    let cleared = node.position("in use Some([])");
    assert!(
        in_use < unstaged && unstaged < cleared,
        "in use until unstaged: {:?}",
        node.log.lock().unwrap()
    );
}

#[actix_rt::test]
async fn a_device_found_staged_is_staged_again_before_a_pod_publishes_it() {
    tokio::time::pause();
    let fakes = Fakes::default();
    fakes.set_on_disk(staged_on_disk());
    let node = start_with(false, fakes);
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("u1 ready", BUDGET, || {
        node.view.readiness("u1") == MountReadiness::Ready
    })
    .await;
    assert_eq!(
        node.csi.calls(),
        ["stage h-data", "publish u1 h-data "],
        "the uncertain device is staged again (idempotent), never unstaged under the pod"
    );
}

#[actix_rt::test]
async fn a_volume_is_never_unstaged_while_a_pods_publish_of_it_runs() {
    tokio::time::pause();
    let node = start(false);
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("u1 ready", BUDGET, || {
        node.view.readiness("u1") == MountReadiness::Ready
    })
    .await;
    // u1 goes and u2 comes: the volume stays staged for u2 while u1's publish is undone.
    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(claim_pod("u1"))))
        .unwrap();
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(claim_pod("u2"))))
        .unwrap();
    eventually("u2's publish running, u1's undone", BUDGET, || {
        node.logged("begin publish u2 h-data ") && node.logged("unpublish u1 h-data")
    })
    .await;
    // u2 goes while its publish of the staged volume runs: no pod uses or wants it now.
    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(claim_pod("u2"))))
        .unwrap();
    eventually("unstaged at last", BUDGET, || node.logged("unstage h-data")).await;
    assert!(
        node.position("publish u2 h-data ") < node.position("begin unstage h-data"),
        "CSI calls on one volume never overlap: {:?}",
        node.log.lock().unwrap()
    );
}
