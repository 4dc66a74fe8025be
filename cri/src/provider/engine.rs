//! The CRI provider's engine: the pods it runs and what the runtime holds for each, shared
//! between the provider's synchronous methods and its async tasks — one worker per pod (one
//! sync at a time per pod, pods in parallel, as the kubelet's pod workers) and the PLEG, which
//! relists every second while the node has pods and none otherwise (every 300 s while the
//! runtime's container events arrive). Tasks put their updates in the outbox and wake the
//! actor through the sink it handed over.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{Pod, PodStatus},
    apimachinery::pkg::api::resource::Quantity,
};
use nodepulse_supervisor::Recipient;
use tokio::{runtime::Handle, sync::Notify};

use super::{
    backoff::Backoff,
    isolation::IsolationSettings,
    pleg_health::PlegHealth,
    pod_state::{End, Work},
    resize::resize_actions,
    sandbox::{ClusterDns, log_directory},
    sandbox_turns::SandboxTurns,
    sent_status::SentStatus,
    status::{StartError, StatusInputs, pod_status, reported_ips},
    task_panics::{EngineTask, Faults, TaskPanics},
    termination_message::{joined, termination_message},
    userns::UserNamespaces,
    view::PodRuntime,
};
use nodepulse_actors::{
    clock::WallClock,
    kept_pod::KeptPod,
    node_status::NodeView,
    pods::{PodUpdate, UpdateSink, images::PullBackoff},
    ports::{
        ContainerFilter, ContainerRuntime, ContainerRuntimeResult, ContainerState, PodEvent,
        PodsPublisher, ProbeRunner, RuntimeService, SandboxFilter,
    },
    prober::{PodProbeView, ProbePods, ProbeResults},
    runtime_probe::CapabilitiesView,
    volume_manager::{PodVolumeView, SubPathHost, VolumeSourceApi},
};

/// The kubelet's relist period.
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// How long a pod waits after a failed sync that set no back-off of its own.
pub const SYNC_ERROR_BACKOFF: Duration = Duration::from_secs(10);

/// Pod sandboxes being made at once by default (`maxParallelSandboxes` unset), for each of the
/// machine's cores. A sandbox is the runtime's heaviest step (the pause container's shim, the
/// network namespace, the CNI plugins), and a burst of them shares the cores: made all at once
/// (as the kubelet's pod workers do) every pod of a burst waits until nearly all are done, where
/// made a few at a time they come out one after another, sooner for all but the last and no
/// later for it. `nodepulse-bench runtime-floor` (the runtime alone) on containerd 1.6 with 2
/// cores, 100 pods: all started after 8.3–8.8 s a hundred at a time, each after 7.4–7.8 s
/// (p50); eight at a time 6.5–6.9 s, each after 3.1–3.6 s. Two a core here, as a pod's
/// containers are created and started outside its turn, beside the next pods' sandboxes; with
/// the agent, four a core was no sooner (docs/benchmarks/real-pods.md, "How many at once").
pub const SANDBOXES_AT_ONCE_PER_CORE: usize = 2;

/// The runtime the provider drives: pod calls, and the version for container IDs.
pub trait PodRuntimePort: ContainerRuntime + RuntimeService {}
impl<T: ContainerRuntime + RuntimeService> PodRuntimePort for T {}

#[derive(Clone)]
pub struct CriPodsSettings {
    /// The node's addresses (`hostIP(s)`, and the pod IPs of `hostNetwork` pods).
    pub host_ips: Vec<String>,
    /// `podLogsDir` (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// `rootDir`: termination-message files go under `pods/<uid>/containers/<name>/`.
    pub root_dir: PathBuf,
    pub cluster_dns: ClusterDns,
    /// The host's resolv.conf, for `dnsPolicy: Default` and as the fallback.
    pub resolv_conf: PathBuf,
    /// The host's `/etc/hosts`, which `hostNetwork` pods get (with their `hostAliases`).
    pub node_hosts_file: PathBuf,
    /// `seccompDefault`, the seccomp profile root and the masked paths containers get.
    pub isolation: IsolationSettings,
    /// Whether the host can enforce AppArmor (checked once at start, as the kubelet does);
    /// `Err` is the reason a pod asking for a profile is refused with.
    pub apparmor: Result<(), nodepulse_actors::pods::apparmor::AppArmorDisabled>,
    /// `allowedUnsafeSysctls`: patterns beside the safe sysctls that pods may set.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// The node reads static pods (`staticPodPath` or `staticPodURL`): static pods on the
    /// runtime are its own, collected once no source has them.
    pub static_pods: bool,
    /// The node's memory, for Burstable containers' `oom_score_adj`.
    pub memory_capacity: u64,
    pub relist_period: Duration,
    /// No successful relist for longer: Ready is False, `PLEG is not healthy: ...` (the
    /// kubelet's 3 min).
    pub relist_threshold: Duration,
    /// How many pod sandboxes are made at once (`maxParallelSandboxes`; unset:
    /// [`default_sandboxes_at_once`]); at least one.
    pub sandboxes_at_once: usize,
    pub clock: WallClock,
}

/// Why a pod is being torn down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It has a `deletionTimestamp`.
    Deleted,
    /// Evicted: it ends Failed with this reason and message.
    Evicted { reason: String, message: String },
    /// A pod sync handler failed it (`activeDeadlineSeconds`): it ends Failed with this
    /// reason and message, its containers given their grace period.
    Failed { reason: String, message: String },
    /// The API object is gone: clean up and forget it.
    Gone,
}

pub struct PodEntry {
    /// The watch's pod, decoded: its containers are driven from it all the time.
    pub pod: Arc<Pod>,
    /// The same version as kept, shared (not copied) with StatusManager.
    pub kept: KeptPod,
    pub runtime: PodRuntime,
    pub errors: BTreeMap<String, StartError>,
    pub start_time: Timestamp,
    pub pod_ips: Vec<String>,
    /// Passed the kubelet's admission (or needs none): it may run.
    pub admitted: bool,
    /// Its worker: idle or syncing (and whether the PLEG's inspection is current).
    pub work: Work,
    /// Counts the writes of `runtime`. An inspection from outside the pod's sync (the PLEG,
    /// an event) writes only if nothing wrote since it listed and no sync runs: a slow one
    /// must not put an older view over the sync's own (a status flipping back, a running
    /// container started again).
    pub generation: u64,
    pub retry_at: Option<Timestamp>,
    /// Its place in the order pods arrived (static pods of one full name start in it).
    pub arrival: u64,
    /// A static pod that was let start: its full name's one instance until it finished.
    pub static_started: bool,
    pub ending: Option<Ending>,
    /// Whether it is finished (nothing more runs or is reported), and TerminatePod told.
    pub end: End,
    pub last_sent: Option<SentStatus>,
}

#[derive(Default)]
pub struct Core {
    pub pods: HashMap<String, PodEntry>,
    /// Pods that arrived so far (each entry's `arrival`).
    pub arrivals: u64,
    pub outbox: Vec<PodUpdate>,
    pub sink: Option<UpdateSink>,
    pub crash: Backoff,
    /// The kubelet's image pull back-off, per pod and image.
    pub pulls: PullBackoff,
    pub runtime_name: Option<String>,
    pub relists: u64,
    pub pleg_started: bool,
    /// The runtime's container event stream works: the relist is the evented one.
    pub evented: bool,
    /// nodepulse is shutting down: no sync starts, the PLEG ends.
    pub stopped: bool,
    /// The pod list is complete: a pod UID not in `pods` is gone from the API.
    pub listed: bool,
    /// A garbage collection task runs (`gc`); asked for again while it did.
    pub gc_running: bool,
    pub gc_again: bool,
    pub gc_passes: u64,
    /// The pod cgroups' housekeeping runs.
    pub cgroups_started: bool,
    /// Panics caught in the engine's tasks.
    pub panics: TaskPanics,
    pub faults: Faults,
}

pub struct Engine {
    pub settings: CriPodsSettings,
    pub runtime: Arc<dyn PodRuntimePort>,
    pub volumes: Option<Arc<dyn PodVolumeView>>,
    /// ConfigMaps and Secrets (env, pull secrets), through the volume manager's API port.
    pub objects: Option<Arc<dyn VolumeSourceApi>>,
    /// The Node as NodeStatusActor last saw it, for admission and `resourceFieldRef` limits;
    /// `None`: no admission (tests of other rules).
    pub node: Option<Arc<NodeView>>,
    /// Makes and binds containers' subPaths on the node's disk; `None`: a subPath mount
    /// fails the container's start (never mounted unchecked).
    pub sub_paths: Option<Arc<dyn SubPathHost>>,
    /// Sends lifecycle hooks' HTTP requests (the prober's client); `None`: they fail.
    pub http_hooks: Option<Arc<dyn ProbeRunner>>,
    /// The prober: told each pod's running containers at every sync (`probing`).
    pub prober: Option<Recipient<ProbePods>>,
    /// The prober's results, which `started` and `ready` follow.
    pub probe_results: Option<ProbeResults>,
    /// Where each pod's sandboxes and containers are published for services outside the
    /// actors, as `runtime` changes.
    pub pods_view: PodsPublisher,
    /// The runtime's handlers and features as last probed; `None`: it can do neither.
    pub capabilities: Option<Arc<CapabilitiesView>>,
    /// `hostUsers: false` pods' ID blocks.
    pub user_namespaces: UserNamespaces,
    /// The pods' cgroups (`cgroupsPerQOS`); `None`: sandboxes get the runtime's default parent.
    pub pod_cgroups: Option<nodepulse_actors::pods::cgroups::PodCgroupsSetup>,
    core: Mutex<Core>,
    pub(super) pods_present: Notify,
    /// Turns to make a pod sandbox (`sandboxes_at_once`), taken in the order asked.
    pub(super) sandbox_turns: SandboxTurns,
    /// Cuts the PLEG's wait short: the event stream failed, relist now.
    pub(super) relist_now: Notify,
    /// A pod's back-off was set: the PLEG's wait recomputes when it ends.
    pub(super) retries_changed: Notify,
    /// Wakes a garbage collection task waiting out its period.
    pub(super) gc_wanted: Notify,
    /// Wakes the pod cgroups' housekeeping: a pod ended.
    pub(super) cgroups_wanted: Notify,
    pub(super) spawner: Handle,
    /// The PLEG's health, which NodeStatus's Ready setter asks.
    pub(super) pleg_health: Arc<PlegHealth>,
}

/// [`SANDBOXES_AT_ONCE_PER_CORE`] for the cores this process may use.
pub fn default_sandboxes_at_once() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from) * SANDBOXES_AT_ONCE_PER_CORE
}

impl Engine {
    pub fn new(
        settings: CriPodsSettings,
        runtime: Arc<dyn PodRuntimePort>,
        volumes: Option<Arc<dyn PodVolumeView>>,
        spawner: Handle,
    ) -> Self {
        Self {
            runtime,
            volumes,
            objects: None,
            node: None,
            sub_paths: None,
            http_hooks: None,
            prober: None,
            probe_results: None,
            pods_view: PodsPublisher::default(),
            capabilities: None,
            user_namespaces: UserNamespaces::default(),
            pod_cgroups: None,
            core: Mutex::new(Core::default()),
            pods_present: Notify::new(),
            sandbox_turns: SandboxTurns::new(settings.sandboxes_at_once),
            relist_now: Notify::new(),
            retries_changed: Notify::new(),
            gc_wanted: Notify::new(),
            cgroups_wanted: Notify::new(),
            spawner,
            pleg_health: Arc::new(PlegHealth::new(settings.relist_threshold)),
            settings,
        }
    }

    pub fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn now(&self) -> Timestamp {
        (self.settings.clock)()
    }

    /// Queues an Event about `pod` behind the updates already queued.
    pub fn event(&self, pod: &Arc<Pod>, event: PodEvent) {
        self.core().outbox.push(PodUpdate::Event {
            pod: Arc::clone(pod),
            event,
        });
    }

    /// The Node's `status.allocatable` (the locally built Node's before registration, as the
    /// kubelet's `getNodeAnyWay`), empty until either is known.
    pub fn node_allocatable(&self) -> BTreeMap<String, Quantity> {
        self.node
            .as_ref()
            .and_then(|view| view.get_any_way())
            .and_then(|node| node.status.as_ref()?.allocatable.clone())
            .unwrap_or_default()
    }

    /// Tells the actor that updates wait in the outbox.
    pub fn wake(&self) {
        let sink = {
            let core = self.core();
            if core.outbox.is_empty() {
                return;
            }
            core.sink.clone()
        };
        if let Some(sink) = sink {
            sink();
        }
    }

    /// Starts the PLEG on first use, and wakes it: the node has pods.
    pub fn pods_arrived(self: &Arc<Self>) {
        let start = !std::mem::replace(&mut self.core().pleg_started, true);
        if start {
            self.spawn_supervised(EngineTask::Pleg, Self::pleg);
            self.spawn_supervised(EngineTask::EventedPleg, Self::evented_pleg);
        }
        self.pods_present.notify_one();
        self.gc_while_pods();
    }

    /// Asks for a sync of `uid`: run now, or once more after the one in progress.
    pub fn request_sync(self: &Arc<Self>, uid: &str) {
        {
            let mut core = self.core();
            if core.stopped {
                return;
            }
            let Some(entry) = core.pods.get_mut(uid) else {
                return;
            };
            if !entry.work.request() {
                return;
            }
            entry.retry_at = None;
        }
        self.spawn_worker(uid.to_owned());
    }

    /// One pod's worker: syncs (or tears down) until nobody asked for another round.
    pub(super) async fn worker(self: Arc<Self>, uid: String) {
        loop {
            self.worker_fault_point(&uid);
            let ending = {
                let core = self.core();
                match core.pods.get(&uid) {
                    Some(entry) if !entry.end.is_finished() && !core.stopped => {
                        entry.ending.clone()
                    }
                    _ => break,
                }
            };
            // The kubelet's pod worker times each round by its update type.
            let started = tokio::time::Instant::now();
            let operation = if ending.is_some() { "kill" } else { "sync" };
            match ending {
                Some(ending) => self.terminate(&uid, ending).await,
                None => self.sync_pod(&uid).await,
            }
            let took = started.elapsed().as_secs_f64();
            (nodepulse_actors::kubelet_metrics::KUBELET_METRICS.pod_worker_duration)
                .observe(&[operation], took);
            let mut core = self.core();
            let Some(entry) = core.pods.get_mut(&uid) else {
                // Torn down and forgotten: its log directory (and anything left) is garbage.
                drop(core);
                self.want_gc();
                return;
            };
            if !entry.work.round_done() {
                let retry = entry.retry_at.is_some();
                drop(core);
                if retry {
                    // A PLEG waiting out a long (evented) period wakes for it.
                    self.retries_changed.notify_one();
                }
                return;
            }
        }
        if let Some(entry) = self.core().pods.get_mut(&uid) {
            entry.work.stop();
        }
    }

    /// The runtime's name for container IDs, asked once.
    pub async fn runtime_name(&self) -> Option<String> {
        if let Some(name) = self.core().runtime_name.clone() {
            return Some(name);
        }
        match self.runtime.version().await {
            Ok(version) => {
                self.core().runtime_name = Some(version.runtime_name.clone());
                Some(version.runtime_name)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot ask the runtime its name; pod syncs wait");
                None
            }
        }
    }

    /// Reads what the runtime holds for `uid` by its label, and reports the status.
    pub async fn refresh(&self, uid: &str) -> ContainerRuntimeResult<()> {
        let (sandbox_ids, container_ids) = self.listed(uid).await?;
        self.inspect(uid, sandbox_ids, container_ids, None)
            .await
            .map(drop)
    }

    /// [`Self::refresh`] from outside the pod's sync: written only if `runtime` is still
    /// generation `seen` and no sync runs; whether it was.
    pub(super) async fn refresh_if_unchanged(
        &self,
        uid: &str,
        seen: u64,
    ) -> ContainerRuntimeResult<bool> {
        let (sandbox_ids, container_ids) = self.listed(uid).await?;
        self.inspect(uid, sandbox_ids, container_ids, Some(seen))
            .await
    }

    /// The IDs of `uid`'s sandboxes and containers, by its label.
    pub(super) async fn listed(
        &self,
        uid: &str,
    ) -> ContainerRuntimeResult<(Vec<String>, Vec<String>)> {
        let labels = [(super::view::POD_UID_LABEL.to_owned(), uid.to_owned())];
        let sandboxes = self
            .runtime
            .list_pod_sandboxes(SandboxFilter {
                labels: labels.clone().into(),
                ..SandboxFilter::default()
            })
            .await?;
        let containers = self
            .runtime
            .list_containers(ContainerFilter {
                labels: labels.into(),
                ..ContainerFilter::default()
            })
            .await?;
        Ok((
            sandboxes.into_iter().map(|s| s.id).collect(),
            containers.into_iter().map(|c| c.id).collect(),
        ))
    }

    /// Fetches the statuses of these sandboxes and containers of `uid`, and reports; from
    /// outside the pod's sync (`seen`: the generation listed), only if still current. Whether
    /// it was written.
    pub(super) async fn inspect(
        &self,
        uid: &str,
        sandbox_ids: Vec<String>,
        container_ids: Vec<String>,
        seen: Option<u64>,
    ) -> ContainerRuntimeResult<bool> {
        let mut sandboxes = Vec::new();
        for id in sandbox_ids {
            match self.runtime.pod_sandbox_status(id).await {
                Ok(status) => sandboxes.push(status),
                Err(nodepulse_actors::ports::ContainerRuntimeError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        let log_dir = self
            .core()
            .pods
            .get(uid)
            .map(|entry| log_directory(&self.settings.pod_logs_dir, &entry.pod))
            .unwrap_or_default();
        // An exited container's message is read once: its file may go later (the pod's
        // directory is cleaned up once it ended) and the status must not lose it then.
        let read_before: HashMap<String, String> = self
            .core()
            .pods
            .get(uid)
            .map(|entry| {
                (entry.runtime.containers.iter())
                    .filter(|c| c.state == ContainerState::Exited)
                    .map(|c| (c.id.clone(), c.message.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut containers = Vec::new();
        for id in container_ids {
            match self.runtime.container_status(id).await {
                Ok(mut status) => {
                    if status.state == ContainerState::Exited {
                        status.message = match read_before.get(&status.id) {
                            Some(message) => message.clone(),
                            None => {
                                joined(&status.message, &termination_message(&status, &log_dir))
                            }
                        };
                    }
                    containers.push(status);
                }
                Err(nodepulse_actors::ports::ContainerRuntimeError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        {
            let mut core = self.core();
            let Some(entry) = core.pods.get_mut(uid) else {
                return Ok(false);
            };
            let current =
                seen.is_none_or(|seen| entry.generation == seen && !entry.work.is_syncing());
            if !current {
                return Ok(false);
            }
            entry.runtime = PodRuntime::new(sandboxes, containers);
            entry.generation += 1;
            self.pods_view.record(entry.runtime.record(&entry.pod));
            self.publish(&mut core, uid);
        }
        // The status goes out now, not at the next relist.
        self.wake();
        Ok(true)
    }

    /// The pod's status now; `ending` given, as it ends (its containers all stopped).
    pub fn status_of(
        &self,
        entry: &PodEntry,
        runtime_name: &str,
        ending: Option<&Ending>,
    ) -> PodStatus {
        let evicted = match ending {
            Some(Ending::Evicted { reason, message } | Ending::Failed { reason, message }) => {
                Some((reason.as_str(), message.as_str()))
            }
            _ => None,
        };
        pod_status(
            &entry.pod,
            &entry.runtime,
            &StatusInputs {
                runtime_name,
                host_ips: &self.settings.host_ips,
                known_pod_ips: &entry.pod_ips,
                start_time: Some(entry.start_time),
                // A pod that ends shows how its containers ended, not why they did not start.
                errors: ending.is_none().then_some(&entry.errors),
                terminal: ending.is_some(),
                evicted,
                disruption: matches!(ending, Some(Ending::Evicted { .. })),
                probes: (self.probe_results.as_ref()).map(|results| PodProbeView {
                    results,
                    pod: &entry.pod,
                }),
                resizing: ending.is_none()
                    && !resize_actions(&entry.pod, &entry.runtime, self.settings.memory_capacity)
                        .is_empty(),
            },
        )
    }

    /// Queues the pod's status when it changed; a pod that reached a terminal phase is
    /// finished and told to StatusManager as terminated.
    pub fn publish(&self, core: &mut Core, uid: &str) {
        let runtime_name = core.runtime_name.clone().unwrap_or_default();
        let Some(entry) = core.pods.get_mut(uid) else {
            return;
        };
        self.tell_prober(entry, &runtime_name);
        // A pod being torn down reports once, at the end (`terminate`).
        if entry.end.is_finished() || entry.ending.is_some() {
            return;
        }
        let status = self.status_of(entry, &runtime_name, None);
        let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        let ips = reported_ips(&status);
        if !ips.is_empty() {
            entry.pod_ips = ips;
        }
        let sent = SentStatus::of(&status);
        if entry.last_sent.as_ref() != Some(&sent) {
            entry.last_sent = Some(sent);
            core.outbox.push(PodUpdate::Status {
                pod: entry.kept.clone(),
                status: Box::new(status),
            });
        }
        // Finished once nothing of it runs, its sandbox included (the worker stops that).
        if terminal
            && !entry.runtime.any_running()
            && entry.runtime.ready_sandbox().is_none()
            && entry.end.finish()
        {
            core.outbox.push(PodUpdate::Terminated {
                pod: entry.kept.clone(),
            });
        }
    }
}
