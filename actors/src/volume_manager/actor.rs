//! VolumeManagerActor: the kubelet's volume manager. The pod watch fills the desired state
//! (the populator), the disk is read back at start (reconstruction), and a reconciler pass
//! runs every 100 ms while there is work — nothing while idle but one wake-up for the next
//! content refresh (`syncFrequency`). It tells NodeStatus `volumesInUse`, the pod lifecycle
//! actor which pods' volumes changed, and records FailedMount events on the pods. Claims and
//! CSI volumes are the [`csi`] half's.

use std::{
    collections::{BTreeMap, BTreeSet},
    num::NonZeroUsize,
    sync::Arc,
    time::Duration,
};

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, SpawnHandle, StreamHandler, WrapFuture,
};

use nodepulse_supervisor::{Kept, Recipient, SupervisedActor};
use tokio::time::Instant;

use super::{
    MountState, Operation, Plugin, PodDirs, PodVolume, UniqueVolumeName,
    content::{payload_of, sources_of},
    fetch::{FetchOutcome, fetch},
    memory::{Failure, VolumeManagerMemory},
    operation_error::OperationError,
    reconcile,
    state::declares_claims,
    volumes_in_use,
};
use crate::{
    clock::{self, WallClock},
    kept_pod::KeptPod,
    kubelet_metrics::storage_operation,
    messages::{NodeVolumeFacts, VolumesInUse},
    ports::{PodApi, PodEvent, PodSource, PodWatchEvent},
    shrink::{btree_map_after_removal, btree_set_after_removal},
    volume_manager::{PodVolumesChanged, SetUpContext, VolumeHost, VolumeSourceApi},
};

#[path = "actor_csi.rs"]
mod csi;

pub use csi::{CLAIM_RETRY, CsiPorts};

/// The kubelet's reconciler period, while there is work.
pub const RECONCILE_PERIOD: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct VolumeManagerSettings {
    pub node_name: String,
    pub dirs: PodDirs,
    /// How often configMap, secret, downwardAPI and projected content is refreshed (the
    /// kubelet's `syncFrequency`, 1 min).
    pub sync_period: Duration,
    /// How many volumes' sources (ConfigMaps, Secrets, tokens) are fetched at once; `None`:
    /// as many as are due, as the kubelet's operation executor runs each mount on its own. A
    /// fetch waiting behind a shared client holds its request's futures (a few KiB), so a
    /// fleet's nodes take turns instead.
    pub fetches_at_once: Option<NonZeroUsize>,
}

impl VolumeManagerSettings {
    /// Whether a volume of `plugin` waits for a place, with `fetching` volumes fetching.
    pub fn fetch_waits(&self, plugin: Plugin, fetching: usize) -> bool {
        plugin.fetches_sources()
            && self
                .fetches_at_once
                .is_some_and(|bound| fetching >= bound.get())
    }
}

/// Where the actor's messages go.
#[derive(Clone, Default)]
pub struct VolumeManagerPeers {
    pub node_status: Option<Recipient<VolumesInUse>>,
    pub pod_lifecycle: Option<Recipient<PodVolumesChanged>>,
}

pub struct VolumeManagerActor {
    settings: VolumeManagerSettings,
    pods: Arc<dyn PodApi>,
    /// The node's pod source; `None`: a watch of the API of its own.
    source: Option<Arc<dyn PodSource>>,
    sources: Arc<dyn VolumeSourceApi>,
    host: Arc<dyn VolumeHost>,
    memory: Kept<VolumeManagerMemory>,
    peers: VolumeManagerPeers,
    /// Without them, claim volumes stay unresolved and their pods wait.
    csi: Option<CsiPorts>,
    /// (pod UID, volume) whose content is being fetched or whose claim or CSI step runs.
    in_flight: BTreeSet<(String, String)>,
    /// How many of `in_flight` are fetching sources (bounded by `fetches_at_once`).
    fetching: usize,
    /// CSI volumes being staged: a second pod's SetUp waits rather than staging twice.
    staging: BTreeSet<UniqueVolumeName>,
    /// CSI volumes with a SetUp (stage and publish) running, by how many: never unstaged then.
    publishing: BTreeMap<UniqueVolumeName, usize>,
    next_pass: Option<(Instant, SpawnHandle)>,
    last_in_use: Option<Option<Vec<String>>>,
    passes: u64,
    operations: u64,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
}

type Key = (String, String);

impl VolumeManagerActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl VolumeManagerActor {
    pub fn new(
        settings: VolumeManagerSettings,
        pods: Arc<dyn PodApi>,
        sources: Arc<dyn VolumeSourceApi>,
        host: Arc<dyn VolumeHost>,
        memory: Kept<VolumeManagerMemory>,
        peers: VolumeManagerPeers,
    ) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            pods,
            sources,
            host,
            memory,
            peers,
            csi: None,
            source: None,
            in_flight: BTreeSet::new(),
            fetching: 0,
            staging: BTreeSet::new(),
            publishing: BTreeMap::new(),
            next_pass: None,
            last_in_use: None,
            passes: 0,
            operations: 0,
        }
    }

    /// Serves `persistentVolumeClaim` volumes through these ports.
    pub fn with_csi(mut self, ports: CsiPorts) -> Self {
        self.csi = Some(ports);
        self
    }

    /// Follows the node's pod source instead of a watch of its own.
    #[must_use]
    pub fn with_pod_source(mut self, source: Arc<dyn PodSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Rebuilds the actual state from disk. What this process already knew for certain (a
    /// previous instance's mounts still on disk, hostPath volumes that leave no directory)
    /// stays; anything else found is uncertain and set up again before a pod may use it.
    fn reconstruct(&self) {
        let found = match self.host.reconstruct() {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "cannot read the pods' volumes back from disk; retrying at the next pass");
                return;
            }
        };
        self.memory.update(|memory| {
            let known = std::mem::take(&mut memory.actual.mounts);
            let mut actual = found;
            for (key, mounted) in known {
                // CSI publish directories are not read back from disk: what a previous instance
                // published is known from memory only, and must not be forgotten.
                let kept = !mounted.plugin.has_volume_dir() || mounted.plugin == Plugin::Csi;
                if kept || actual.mounts.contains_key(&key) {
                    actual.pod_dirs.insert(key.0.clone());
                    actual.mounts.insert(key, mounted);
                }
            }
            memory.actual = actual;
            memory.reconstructed = true;
        });
    }

    /// Runs a pass at `after` from now, unless one is due sooner.
    fn wake_in(&mut self, after: Duration, ctx: &mut Context<Self>) {
        let at = Instant::now() + after;
        if let Some((due, handle)) = self.next_pass {
            if due <= at {
                return;
            }
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_later(after, |actor, ctx| {
            actor.next_pass = None;
            actor.pass(ctx);
        });
        self.next_pass = Some((at, handle));
    }

    /// One reconciler pass: the operations due now, then when to look again.
    fn pass(&mut self, ctx: &mut Context<Self>) {
        self.passes += 1;
        if !self.memory.read(|m| m.reconstructed) {
            self.reconstruct();
        }
        let now = Instant::now();
        self.resolve_claims(now, ctx);
        let node = self.settings.node_name.clone();
        let (desired, operations) = self.memory.update(|memory| {
            let desired = memory.desired(&node);
            memory.actual.adopt_csi(&desired);
            let operations = reconcile(
                &desired,
                &memory.actual,
                &memory.volumes_attached,
                now,
                self.settings.sync_period,
            );
            (desired, operations)
        });
        let mut waiting = false;
        for operation in operations {
            waiting |= self.run(operation, now, ctx);
        }
        self.report_pod_errors(&desired);
        let in_use = self.memory.update(|memory| {
            memory.synced = memory.reconstructed;
            memory
                .tokens
                .retain_pods(|uid| desired.pods.contains_key(uid));
            volumes_in_use(&desired, &memory.actual, memory.synced)
        });
        self.forget_claims(|uid| desired.pods.contains_key(uid));
        self.report_in_use(in_use);
        if waiting || !self.in_flight.is_empty() {
            self.wake_in(RECONCILE_PERIOD, ctx);
        } else if let Some(refresh) = self.next_refresh(now) {
            self.wake_in(refresh, ctx);
        }
        if let Some(retry) = self.next_claim_retry(now) {
            self.wake_in(retry, ctx);
        }
    }

    /// A FailedMount event, once per pod, for pods with volumes that cannot enter the desired
    /// state (the kubelet records it on every pod sync; a pod here waits without resyncs).
    fn report_pod_errors(&self, desired: &super::DesiredState) {
        let due: Vec<(KeptPod, String)> = self.memory.update(|m| {
            m.pod_errors_reported
                .retain(|uid| desired.pods.contains_key(uid));
            btree_set_after_removal(&mut m.pod_errors_reported);
            let mut due = Vec::new();
            for uid in desired.pods.keys() {
                if m.pod_errors_reported.contains(uid) {
                    continue;
                }
                let message = super::pod_error_message(desired, &m.actual, uid);
                if let (Some(message), Some(pod)) = (message, m.pods.get(uid)) {
                    m.pod_errors_reported.insert(uid.clone());
                    due.push((pod.clone(), message));
                }
            }
            due
        });
        for (pod, message) in due {
            self.record_failed_mount(&pod.pod(), message);
        }
    }

    /// The kubelet's Warning `FailedMount` event on `pod`.
    fn record_failed_mount(&self, pod: &k8s_openapi::api::core::v1::Pod, message: String) {
        let event = PodEvent {
            warning: true,
            reason: "FailedMount".to_owned(),
            message,
            annotations: Default::default(),
        };
        let request = self.pods.record_pod_event(pod, event);
        actix::spawn(async move {
            if let Err(error) = request.await {
                tracing::debug!(%error, "cannot record the FailedMount event");
            }
        });
    }

    /// When the next content refresh is due: the earliest remountable volume's sync period.
    fn next_refresh(&self, now: Instant) -> Option<Duration> {
        self.memory.read(|memory| {
            memory
                .actual
                .mounts
                .values()
                .filter(|m| m.plugin.requires_remount())
                .filter_map(|m| m.set_up_at)
                .map(|at| (at + self.settings.sync_period).saturating_duration_since(now))
                .min()
        })
    }

    fn report_in_use(&mut self, in_use: Option<Vec<UniqueVolumeName>>) {
        let names = in_use.map(|names| names.iter().map(ToString::to_string).collect::<Vec<_>>());
        if self.last_in_use.as_ref() == Some(&names) {
            return;
        }
        if let Some(node_status) = &self.peers.node_status
            && node_status.try_send(VolumesInUse(names.clone())).is_err()
        {
            tracing::warn!("cannot tell NodeStatus the volumes in use; trying again next pass");
            return;
        }
        self.last_in_use = Some(names);
    }

    /// Runs one operation if it is not running and not backing off; whether a pass is wanted again
    /// soon (the operation, or one it makes due, is still to do).
    fn run(&mut self, operation: Operation, now: Instant, ctx: &mut Context<Self>) -> bool {
        let key = operation_key(&operation);
        if self.in_flight.contains(&key) {
            return true;
        }
        let backing_off = self
            .memory
            .read(|m| m.failures.get(&key).map(|f| f.retry_at))
            .filter(|at| *at > now);
        if let Some(retry_at) = backing_off {
            // Sleep until the back-off ends rather than polling through it.
            self.wake_in(retry_at.saturating_duration_since(now), ctx);
            return false;
        }
        if self.waits_for_a_fetch(&operation) {
            // A fetch's completion wakes the next pass.
            return true;
        }
        self.operations += 1;
        match operation {
            Operation::Unmount {
                pod_uid,
                volume,
                plugin,
            } => {
                // First the containers' subPath binds, as the kubelet's UnmountVolume: one
                // left would keep the volume (a CSI device) in use.
                if let Err(error) = self.host.clean_sub_paths(&pod_uid, &volume) {
                    self.settle(&key, Err(OperationError::CleanSubPaths(error)), now);
                    return true;
                }
                if plugin == Plugin::Csi {
                    return self.csi_tear_down((pod_uid, volume), ctx);
                }
                let started = Instant::now();
                let result = self.host.tear_down(&pod_uid, &volume, plugin);
                storage_operation(plugin.name(), "volume_unmount", started, result.is_ok());
                self.settle(&key, result.map_err(OperationError::from), now);
                if self.memory.read(|m| !m.failures.contains_key(&key)) {
                    self.memory
                        .update(|m| m.actual.mark_unmounted(&pod_uid, &volume));
                    tracing::info!(pod_uid, volume, "volume torn down");
                }
                self.changed(&pod_uid);
                // This pass planned no removal of the pod's directory (the volume was still
                // set up then), and nothing else may come to run another: a force-deleted pod
                // sends no more watch events, an orphan read back at start none at all.
                true
            }
            Operation::UnmountDevice { unique_name } => self.csi_unmount_device(unique_name, ctx),
            Operation::RemovePodDir { pod_uid } => {
                match self.host.remove_pod_dir(&pod_uid) {
                    Ok(()) => self.memory.update(|m| {
                        m.actual.mark_pod_dir_removed(&pod_uid);
                        m.pod_dir_failures.remove(&pod_uid);
                        btree_map_after_removal(&mut m.pod_dir_failures);
                    }),
                    Err(error) => self.memory.update(|m| {
                        m.pod_dir_failures.insert(pod_uid.clone(), error.message);
                    }),
                }
                false
            }
            Operation::Mount { pod_uid, volume } | Operation::Remount { pod_uid, volume } => {
                self.set_up(pod_uid, volume, ctx)
            }
        }
    }

    /// Whether `operation` would fetch sources while `fetches_at_once` are already fetching.
    fn waits_for_a_fetch(&self, operation: &Operation) -> bool {
        let (Operation::Mount { volume, .. } | Operation::Remount { volume, .. }) = operation
        else {
            return false;
        };
        self.settings.fetch_waits(volume.plugin, self.fetching)
    }

    /// SetUp of one volume: at once for emptyDir, hostPath and image, after fetching its sources
    /// for the API-backed plugins, through the CSI node plugin for claims.
    fn set_up(&mut self, pod_uid: String, volume: PodVolume, ctx: &mut Context<Self>) -> bool {
        let key = (pod_uid.clone(), volume.name.clone());
        let Some(pod) = self.memory.read(|m| m.pods.get(&pod_uid).map(KeptPod::pod)) else {
            return false;
        };
        match volume.plugin {
            Plugin::Csi => self.csi_set_up(pod_uid, volume, ctx),
            Plugin::EmptyDir | Plugin::HostPath | Plugin::Image => {
                let started = Instant::now();
                let result = self.finish_set_up(&pod, &volume, None);
                let (plugin, ok) = (volume.plugin.name(), result.is_ok());
                storage_operation(plugin, "volume_mount", started, ok);
                self.settle(&key, result.map_err(OperationError::from), Instant::now());
                false
            }
            Plugin::ConfigMap | Plugin::Secret | Plugin::DownwardApi | Plugin::Projected => {
                let sources = sources_of(&pod, &volume.spec.volume_in(&pod));
                let outcome = self.memory.read(|m| {
                    fetch(
                        Arc::clone(&self.sources),
                        sources,
                        &m.tokens,
                        (self.wall_clock)(),
                    )
                });
                self.in_flight.insert(key.clone());
                self.fetching += 1;
                let started = Instant::now();
                ctx.spawn(outcome.into_actor(self).map(
                    move |outcome: FetchOutcome, actor, ctx| {
                        actor.in_flight.remove(&key);
                        actor.fetching -= 1;
                        actor.memory.update(|m| {
                            for (spec, token) in outcome.issued {
                                m.tokens.insert(spec, token);
                            }
                        });
                        // The pod may have gone while the API answered.
                        let still_wanted = actor.memory.read(|m| {
                            m.desired_pod(&actor.settings.node_name, &key.0)
                                .wants(&key.0, &key.1)
                        });
                        if still_wanted {
                            let allocatable = actor.memory.read(|m| m.allocatable.clone());
                            let result = payload_of(
                                &pod,
                                &volume.spec.volume_in(&pod),
                                &outcome.fetched,
                                &allocatable,
                            )
                            .map_err(OperationError::from)
                            .and_then(|payload| {
                                (actor.finish_set_up(&pod, &volume, Some(&payload)))
                                    .map_err(OperationError::from)
                            });
                            let (plugin, ok) = (volume.plugin.name(), result.is_ok());
                            storage_operation(plugin, "volume_mount", started, ok);
                            actor.settle(&key, result, Instant::now());
                        }
                        // Completions arriving together share one pass.
                        actor.wake_in(Duration::ZERO, ctx);
                    },
                ));
                true
            }
        }
    }

    /// The disk half of SetUp; records the mount on success.
    fn finish_set_up(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        volume: &PodVolume,
        content: Option<&super::content::Payload>,
    ) -> Result<(), super::VolumeHostError> {
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let allocatable = self.memory.read(|m| m.allocatable.clone());
        let context = SetUpContext {
            pod_uid,
            pod_memory_limit: pod_memory_limit(pod),
            allocatable: &allocatable,
            content,
            fs_group: pod
                .spec
                .as_ref()
                .and_then(|spec| spec.security_context.as_ref()?.fs_group)
                .and_then(|group| u32::try_from(group).ok()),
        };
        self.host.set_up(volume, context)?;
        let was_ready = self.memory.read(|m| {
            m.actual
                .mounts
                .get(&(pod_uid.to_owned(), volume.name.clone()))
                .is_some_and(|mounted| mounted.state == MountState::Mounted)
        });
        self.memory
            .update(|m| m.actual.mark_mounted(pod_uid, volume, Instant::now()));
        if !was_ready {
            tracing::info!(pod_uid, volume = %volume.name, plugin = %volume.plugin, "volume set up");
            self.changed(pod_uid);
        }
        Ok(())
    }

    /// Records the outcome of an operation on `key`: a failure backs off and is reported on
    /// the pod as the kubelet's FailedMount event; a success clears the failure.
    fn settle(&self, key: &Key, result: Result<(), OperationError>, now: Instant) {
        self.settle_as("MountVolume.SetUp", key, result, now);
    }

    /// [`Self::settle`] for a failure of the kubelet's `operation` (`MountVolume.MountDevice`).
    fn settle_as(
        &self,
        operation: &str,
        key: &Key,
        result: Result<(), OperationError>,
        now: Instant,
    ) {
        match result {
            Ok(()) => {
                self.memory.update(|m| {
                    m.failures.remove(key);
                    btree_map_after_removal(&mut m.failures);
                });
            }
            Err(error) => {
                let error = error.to_string();
                let (pod, failure) = self.memory.update(|m| {
                    let failure = Failure::next(m.failures.get(key), error.clone(), now);
                    m.failures.insert(key.clone(), failure.clone());
                    (m.pods.get(&key.0).cloned(), failure)
                });
                tracing::warn!(pod_uid = %key.0, volume = %key.1, %error, retry_in = ?failure.backoff, "volume operation failed");
                let (Some(pod), true) = (
                    pod,
                    self.memory.read(|m| {
                        m.desired_pod(&self.settings.node_name, &key.0)
                            .wants(&key.0, &key.1)
                    }),
                ) else {
                    return;
                };
                self.record_failed_mount(
                    &pod.pod(),
                    format!("{operation} failed for volume {:?} : {error}", key.1),
                );
                self.changed(&key.0);
            }
        }
    }

    fn changed(&self, pod_uid: &str) {
        if let Some(lifecycle) = &self.peers.pod_lifecycle
            && lifecycle
                .try_send(PodVolumesChanged {
                    pod_uid: pod_uid.to_owned(),
                })
                .is_err()
        {
            tracing::debug!(
                pod_uid,
                "the pod lifecycle actor's mailbox is full; it polls anyway"
            );
        }
    }
}

fn operation_key(operation: &Operation) -> Key {
    match operation {
        Operation::Mount { pod_uid, volume } | Operation::Remount { pod_uid, volume } => {
            (pod_uid.clone(), volume.name.clone())
        }
        Operation::Unmount {
            pod_uid, volume, ..
        } => (pod_uid.clone(), volume.clone()),
        Operation::UnmountDevice { unique_name } => csi::device_key(unique_name),
        Operation::RemovePodDir { pod_uid } => (pod_uid.clone(), String::new()),
    }
}

/// The pod's memory limit when every container has one (bounds a memory-backed volume).
fn pod_memory_limit(pod: &k8s_openapi::api::core::v1::Pod) -> Option<u64> {
    let containers = &pod.spec.as_ref()?.containers;
    containers
        .iter()
        .map(|c| {
            let limit = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
            crate::quantity::parse_quantity(&limit.0).ok()
        })
        .sum::<Option<f64>>()
        .map(|bytes| bytes.max(0.0) as u64)
}

impl Actor for VolumeManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // A fresh instance reads the disk back before its first pass: a predecessor killed
        // mid-operation may have left more (or less) than its memory says.
        self.reconstruct();
        ctx.add_stream(match &self.source {
            Some(source) => source.subscribe(),
            None => self.pods.watch_pods(&self.settings.node_name),
        });
        self.wake_in(Duration::ZERO, ctx);
    }
}

impl StreamHandler<PodWatchEvent> for VolumeManagerActor {
    fn handle(&mut self, event: PodWatchEvent, ctx: &mut Context<Self>) {
        match event {
            PodWatchEvent::Applied(pod) => {
                let Some(uid) = pod.uid().map(str::to_owned) else {
                    return;
                };
                let claims = declares_claims(&pod.pod());
                let new = self.memory.update(|m| {
                    if claims {
                        m.claim_pods.insert(uid.clone());
                    }
                    m.pods.insert(uid.clone(), pod).is_none()
                });
                if new {
                    self.changed(&uid);
                }
            }
            PodWatchEvent::Deleted(pod) => {
                if let Some(uid) = pod.uid() {
                    self.memory.update(|m| m.forget_pod(uid));
                }
            }
            PodWatchEvent::Listed => self.memory.update(|m| m.listed = true),
        }
        self.wake_in(Duration::ZERO, ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        tracing::warn!("the watch on this node's pods ended; volumes follow no new pods");
    }
}

impl Handler<NodeVolumeFacts> for VolumeManagerActor {
    type Result = ();

    fn handle(&mut self, facts: NodeVolumeFacts, ctx: &mut Context<Self>) {
        let attached: BTreeSet<UniqueVolumeName> = facts
            .volumes_attached
            .iter()
            .map(|name| UniqueVolumeName::from_reported(name))
            .collect();
        let changed = self.memory.update(|m| {
            let changed = m.volumes_attached != attached;
            m.volumes_attached = attached;
            m.allocatable = facts.allocatable;
            changed
        });
        if changed {
            self.wake_in(Duration::ZERO, ctx);
        }
    }
}

impl SupervisedActor for VolumeManagerActor {
    fn debug_state(&self) -> serde_json::Value {
        super::debug::describe(
            &self.memory,
            &self.settings,
            (&self.in_flight, self.fetching),
            self.host.describe(),
            (self.passes, self.operations),
        )
    }
}
