//! VolumeManagerActor against in-memory fakes of its three ports on paused tokio time: a
//! missing ConfigMap backs off and is reported, then mounts once it appears; an idle manager
//! wakes only for the next refresh; nothing reconstructed is torn down before the pod list is
//! complete; a pod gone from the API without a terminal status, and an orphan read back at
//! start, leave no directory; `volumesInUse` goes to NodeStatus once the reconciler synced.

use crate::kept_pod::KeptPod;
use std::{
    collections::BTreeSet,
    num::NonZeroUsize,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix::Actor;
use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use nodepulse_supervisor::{Kept, Recipient};
use tokio::sync::mpsc;

use super::{
    ActualState, MountState, MountedVolume, Plugin, PodDirs, PodVolume, UniqueVolumeName,
    VolumeManagerActor, VolumeManagerMemory, VolumeManagerPeers, VolumeManagerSettings,
    content::{TokenSpec, token::IssuedToken},
    fixtures::pod,
};
use crate::{
    messages::VolumesInUse,
    ports::{ApiError, ApiResult, PodApi, PodEvent, PodWatchEvent, fakes::eventually},
    volume_manager::{
        PodVolumeView, PodVolumesChanged, SetUpContext, VolumeHost, VolumeHostError,
        VolumeSourceApi, ports::fakes::objects::FakeObjects,
    },
};

#[derive(Default)]
struct Recorded {
    events: Vec<(String, PodEvent)>,
    set_ups: Vec<(String, String)>,
    tear_downs: Vec<(String, String)>,
    sub_paths_cleaned: Vec<(String, String)>,
    removed_pod_dirs: Vec<String>,
    on_disk: ActualState,
}

#[derive(Clone, Default)]
pub(super) struct Fakes {
    recorded: Arc<Mutex<Recorded>>,
    pub(super) watch: Arc<Mutex<Option<mpsc::UnboundedReceiver<PodWatchEvent>>>>,
    objects: FakeObjects,
}

impl Fakes {
    pub(super) fn events(&self) -> Vec<(String, PodEvent)> {
        self.state().events.clone()
    }

    /// What reconstruction reads back from disk at start.
    pub(super) fn set_on_disk(&self, actual: ActualState) {
        self.state().on_disk = actual;
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap()
    }
}

impl PodApi for Fakes {
    fn get_pod(&self, _: &str, _: &str) -> BoxFuture<'static, ApiResult<Pod>> {
        Box::pin(async { Err(ApiError::NotFound("unused".into())) })
    }
    fn patch_pod_status(
        &self,
        _: &str,
        _: &str,
        _: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Pod>> {
        Box::pin(async { Err(ApiError::NotFound("unused".into())) })
    }
    fn delete_pod(&self, _: &str, _: &str, _: &str) -> BoxFuture<'static, ApiResult<()>> {
        Box::pin(async { Ok(()) })
    }
    fn watch_pods(&self, _: &str) -> BoxStream<'static, PodWatchEvent> {
        let mut receiver = self.watch.lock().unwrap().take().expect("one watch");
        Box::pin(futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)))
    }
    fn record_pod_event(&self, pod: &Pod, event: PodEvent) -> BoxFuture<'static, ApiResult<()>> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.state().events.push((name, event));
        Box::pin(async { Ok(()) })
    }
}

impl VolumeSourceApi for Fakes {
    fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<ConfigMap>> {
        self.objects.get_config_map(namespace, name)
    }
    fn get_secret(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>> {
        self.objects.get_secret(namespace, name)
    }
    fn request_token(&self, spec: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        self.objects.request_token(spec)
    }
}

impl VolumeHost for Fakes {
    fn reconstruct(&self) -> Result<ActualState, VolumeHostError> {
        Ok(self.state().on_disk.clone())
    }
    fn set_up(&self, volume: &PodVolume, context: SetUpContext<'_>) -> Result<(), VolumeHostError> {
        self.state()
            .set_ups
            .push((context.pod_uid.to_owned(), volume.name.clone()));
        Ok(())
    }
    fn tear_down(&self, pod_uid: &str, volume: &str, _: Plugin) -> Result<(), VolumeHostError> {
        self.state()
            .tear_downs
            .push((pod_uid.to_owned(), volume.to_owned()));
        Ok(())
    }
    fn clean_sub_paths(&self, pod_uid: &str, volume: &str) -> Result<(), VolumeHostError> {
        self.state()
            .sub_paths_cleaned
            .push((pod_uid.to_owned(), volume.to_owned()));
        Ok(())
    }
    fn remove_pod_dir(&self, pod_uid: &str) -> Result<(), VolumeHostError> {
        self.state().removed_pod_dirs.push(pod_uid.to_owned());
        Ok(())
    }
}

struct Running {
    fakes: Fakes,
    watch: mpsc::UnboundedSender<PodWatchEvent>,
    memory: Kept<VolumeManagerMemory>,
    in_use: Arc<Mutex<Vec<Option<Vec<String>>>>>,
    changed: Arc<Mutex<BTreeSet<String>>>,
    _actor: actix::Addr<VolumeManagerActor>,
}

fn start(fakes: Fakes) -> Running {
    start_with(fakes, None)
}

/// `start`, with the volume manager fetching at most `fetches_at_once` volumes' sources at once.
fn start_with(fakes: Fakes, fetches_at_once: Option<NonZeroUsize>) -> Running {
    let (watch, receiver) = mpsc::unbounded_channel();
    *fakes.watch.lock().unwrap() = Some(receiver);
    let memory = Kept::<VolumeManagerMemory>::default();
    let in_use = Arc::new(Mutex::new(Vec::new()));
    let changed = Arc::new(Mutex::new(BTreeSet::new()));
    let (sink, woken) = (Arc::clone(&in_use), Arc::clone(&changed));
    let peers = VolumeManagerPeers {
        node_status: Some(Recipient::from_fn(move |VolumesInUse(list)| {
            sink.lock().unwrap().push(list);
            Ok(())
        })),
        pod_lifecycle: Some(Recipient::from_fn(move |c: PodVolumesChanged| {
            woken.lock().unwrap().insert(c.pod_uid);
            Ok(())
        })),
    };
    let settings = VolumeManagerSettings {
        node_name: "n1".into(),
        dirs: PodDirs::new("/var/lib/kubelet"),
        sync_period: Duration::from_secs(60),
        fetches_at_once,
    };
    let actor = VolumeManagerActor::new(
        settings,
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        memory.clone(),
        peers,
    )
    .start();
    Running {
        fakes,
        watch,
        memory,
        in_use,
        changed,
        _actor: actor,
    }
}

fn cfg_pod(uid: &str) -> Pod {
    pod(
        uid,
        "n1",
        serde_json::json!([{"name": "cfg", "configMap": {"name": "app"}}]),
    )
}

fn mounted(memory: &Kept<VolumeManagerMemory>, uid: &str) -> bool {
    memory.read(|m| {
        m.actual
            .mounts
            .get(&(uid.to_owned(), "cfg".to_owned()))
            .is_some_and(|v| v.state == MountState::Mounted)
    })
}

#[actix_rt::test]
async fn a_missing_config_map_backs_off_with_failed_mount_events_then_mounts_once_it_appears() {
    tokio::time::pause();
    let node = start(Fakes::default());
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(cfg_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("a FailedMount event", Duration::from_secs(1), || {
        !node.fakes.state().events.is_empty()
    })
    .await;
    let (pod, event) = node.fakes.state().events[0].clone();
    assert_eq!(pod, "pod-u1");
    assert_eq!(
        (event.warning, event.reason.as_str(), event.message.as_str()),
        (
            true,
            "FailedMount",
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app\" not found"
        )
    );
    // 0.5 s, 1 s, 2 s, 4 s, 8 s: six attempts within 16 s, not one per 100 ms pass.
    tokio::time::sleep(Duration::from_secs(16)).await;
    let failures = node.fakes.state().events.len();
    assert!((5..=6).contains(&failures), "{failures} attempts in 16 s");
    assert!(!mounted(&node.memory, "u1"));

    node.fakes.objects.set_config_map("app", &[("k", "v")]);
    eventually("the volume is mounted", Duration::from_secs(20), || {
        mounted(&node.memory, "u1")
    })
    .await;
    assert!(
        node.changed.lock().unwrap().contains("u1"),
        "the pod lifecycle actor is woken"
    );
    assert_eq!(
        node.fakes.state().set_ups,
        [("u1".to_owned(), "cfg".to_owned())]
    );
}

/// Seven pods with a configMap volume each, whose reads take 50 ms: the most read at once
/// until every volume is mounted.
async fn most_fetching_at_once(fetches_at_once: Option<NonZeroUsize>) -> usize {
    tokio::time::pause();
    let fakes = Fakes::default();
    fakes.objects.set_config_map("app", &[("k", "v")]);
    fakes
        .objects
        .read_config_maps_taking(Duration::from_millis(50));
    let node = start_with(fakes, fetches_at_once);
    let uids: Vec<String> = (1..=7).map(|n| format!("u{n}")).collect();
    for uid in &uids {
        node.watch
            .send(PodWatchEvent::Applied(KeptPod::from(cfg_pod(uid))))
            .unwrap();
    }
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually(
        "every pod's volume is mounted",
        Duration::from_secs(5),
        || uids.iter().all(|uid| mounted(&node.memory, uid)),
    )
    .await;
    assert_eq!(node.fakes.state().set_ups.len(), uids.len());
    node.fakes.objects.most_config_map_reads_at_once()
}

#[actix_rt::test]
async fn with_a_bound_that_many_volumes_fetch_at_once_and_every_pod_mounts() {
    assert_eq!(most_fetching_at_once(NonZeroUsize::new(2)).await, 2);
}

#[actix_rt::test]
async fn without_a_bound_every_due_volume_fetches_at_once() {
    assert_eq!(most_fetching_at_once(None).await, 7);
}

#[actix_rt::test]
async fn an_idle_manager_wakes_only_to_refresh_content_each_sync_period() {
    tokio::time::pause();
    let node = start(Fakes::default());
    node.fakes.objects.set_config_map("app", &[("k", "v")]);
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(cfg_pod("u1"))))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("mounted", Duration::from_secs(1), || {
        mounted(&node.memory, "u1")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(
        node.fakes.state().set_ups.len(),
        1,
        "no refresh before the sync period"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        node.fakes.state().set_ups.len(),
        2,
        "one refresh at the sync period"
    );
}

#[actix_rt::test]
async fn nothing_reconstructed_is_torn_down_before_the_pod_list_is_complete() {
    tokio::time::pause();
    let fakes = Fakes::default();
    let volume = MountedVolume {
        plugin: Plugin::EmptyDir,
        unique_name: UniqueVolumeName::pod_scoped(Plugin::EmptyDir, "old", "data"),
        attachable: false,
        state: MountState::Uncertain,
        set_up_at: None,
        csi: None,
    };
    {
        let mut state = fakes.state();
        state
            .on_disk
            .mounts
            .insert(("old".into(), "data".into()), volume);
        state.on_disk.pod_dirs.insert("old".into());
    }
    let node = start(fakes);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        node.fakes.state().tear_downs.is_empty(),
        "the pod may still come"
    );
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("the orphan is torn down", Duration::from_secs(1), || {
        node.fakes.state().tear_downs == [("old".to_owned(), "data".to_owned())]
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_deleted_without_a_terminal_status_has_its_volumes_and_then_its_directory_removed() {
    tokio::time::pause();
    let node = start(Fakes::default());
    // emptyDir only: no content refresh is ever due to wake the manager again.
    let scratch = pod(
        "u1",
        "n1",
        serde_json::json!([{"name": "scratch", "emptyDir": {}}]),
    );
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(scratch.clone())))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually("set up", Duration::from_secs(1), || {
        node.fakes.state().set_ups.len() == 1
    })
    .await;
    // A force delete: the pod goes from the API while still Running.
    node.watch
        .send(PodWatchEvent::Deleted(KeptPod::from(scratch)))
        .unwrap();
    eventually(
        "the pod's directory is removed",
        Duration::from_secs(1),
        || node.fakes.state().removed_pod_dirs == ["u1"],
    )
    .await;
    assert_eq!(
        node.fakes.state().tear_downs,
        [("u1".to_owned(), "scratch".to_owned())]
    );
    assert_eq!(
        node.fakes.state().sub_paths_cleaned,
        [("u1".to_owned(), "scratch".to_owned())],
        "the containers' subPath binds go with the volume"
    );
    assert!(node.memory.read(|m| m.actual.pod_dirs.is_empty()));
}

#[actix_rt::test]
async fn an_orphan_read_back_at_start_is_torn_down_and_its_directory_removed() {
    tokio::time::pause();
    let fakes = Fakes::default();
    {
        let mut state = fakes.state();
        state.on_disk.mounts.insert(
            ("old".into(), "data".into()),
            MountedVolume {
                plugin: Plugin::EmptyDir,
                unique_name: UniqueVolumeName::pod_scoped(Plugin::EmptyDir, "old", "data"),
                attachable: false,
                state: MountState::Uncertain,
                set_up_at: None,
                csi: None,
            },
        );
        state.on_disk.pod_dirs.insert("old".into());
    }
    let node = start(fakes);
    node.watch.send(PodWatchEvent::Listed).unwrap();
    eventually(
        "the orphan's directory is removed",
        Duration::from_secs(1),
        || node.fakes.state().removed_pod_dirs == ["old"],
    )
    .await;
}

#[actix_rt::test]
async fn an_image_volume_is_ready_at_once_and_has_no_host_path() {
    tokio::time::pause();
    let node = start(Fakes::default());
    let pod = pod(
        "u1",
        "n1",
        serde_json::json!([
            {"name": "kitten", "image": {"reference": "r/kitten:1"}},
            {"name": "cache", "emptyDir": {}},
        ]),
    );
    node.watch
        .send(PodWatchEvent::Applied(KeptPod::from(pod)))
        .unwrap();
    node.watch.send(PodWatchEvent::Listed).unwrap();
    let view = super::VolumeView::new(
        node.memory.clone(),
        "n1".to_owned(),
        PodDirs::new("/var/lib/kubelet"),
    );
    eventually(
        "the pod's volumes are ready",
        Duration::from_secs(1),
        || view.readiness("u1") == crate::volume_manager::MountReadiness::Ready,
    )
    .await;
    assert_eq!(
        view.host_paths("u1").into_keys().collect::<Vec<_>>(),
        ["cache"],
        "the runtime mounts the image: no host path stands for it"
    );
}

#[actix_rt::test]
async fn volumes_in_use_is_reported_once_the_reconciler_synced() {
    tokio::time::pause();
    let node = start(Fakes::default());
    eventually("volumesInUse is reported", Duration::from_secs(1), || {
        !node.in_use.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        *node.in_use.lock().unwrap(),
        [Some(Vec::<String>::new())],
        "an empty list once synced, never None after it, sent once"
    );
}

#[actix_rt::test]
async fn full_peer_mailboxes_never_hold_the_volume_manager_up() {
    tokio::time::pause();
    let fakes = Fakes::default();
    fakes.objects.set_config_map("app", &[("k", "v")]);
    let (watch, receiver) = mpsc::unbounded_channel();
    *fakes.watch.lock().unwrap() = Some(receiver);
    let memory = Kept::<VolumeManagerMemory>::default();
    // Both peers refuse everything, as full mailboxes do.
    let peers = VolumeManagerPeers {
        node_status: Some(Recipient::from_fn(|m| {
            Err(nodepulse_supervisor::SendError::Full(m))
        })),
        pod_lifecycle: Some(Recipient::from_fn(|m| {
            Err(nodepulse_supervisor::SendError::Full(m))
        })),
    };
    let settings = VolumeManagerSettings {
        node_name: "n1".into(),
        dirs: PodDirs::new("/var/lib/kubelet"),
        sync_period: Duration::from_secs(60),
        fetches_at_once: None,
    };
    let _actor = VolumeManagerActor::new(
        settings,
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        Arc::new(fakes.clone()),
        memory.clone(),
        peers,
    )
    .start();
    let uids: Vec<String> = (0..200).map(|i| format!("u{i}")).collect();
    for uid in &uids {
        watch
            .send(PodWatchEvent::Applied(KeptPod::from(cfg_pod(uid))))
            .unwrap();
    }
    watch.send(PodWatchEvent::Listed).unwrap();
    eventually(
        "every pod's volume is mounted",
        Duration::from_secs(5),
        || uids.iter().all(|uid| mounted(&memory, uid)),
    )
    .await;
}
