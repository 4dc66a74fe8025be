//! The CRI pod lifecycle provider (the default for `runtime: cri`): runs the pods bound to
//! this node on the container runtime through the [`ContainerRuntime`] port, and reports their
//! statuses as the kubelet would. Its methods only record what happened and hand work to the
//! async [`engine`]; results come back through the outbox, and the actor is woken for them.

mod admit;
mod backoff;
#[cfg(test)]
mod capability_tests;
mod container;
mod deadline;
mod engine;
mod etc_hosts;
mod evented;
mod gc;
mod grace;
#[cfg(test)]
mod hook_tests;
mod hooks;
mod image;
mod image_volume;
#[cfg(test)]
mod image_volume_tests;
pub mod isolation;
#[cfg(test)]
mod isolation_tests;
mod kill;
mod non_root;
mod objects;
#[cfg(test)]
mod observed_generation_tests;
mod plan;
mod pleg;
mod pleg_health;
mod pod_cgroups;
#[cfg(test)]
mod pod_cgroups_tests;
mod pod_state;
#[cfg(test)]
mod pods_view_tests;
mod post_start;
mod probing;
mod recursive_read_only;
mod resize;
#[cfg(test)]
mod resize_tests;
#[cfg(test)]
mod restart_rule_tests;
#[cfg(test)]
mod rule_tests;
mod sandbox;
#[cfg(test)]
mod sandbox_turn_tests;
mod sandbox_turns;
mod sent_status;
#[cfg(test)]
mod sidecar_tests;
mod static_turn;
mod status;
mod status_resources;
mod sub_path;
mod task_panics;
#[cfg(test)]
mod task_tests;
mod tasks;
mod terminate;
mod termination_message;
#[cfg(test)]
mod tests;
mod user_namespaces;
mod userns;
#[cfg(test)]
mod userns_manager_tests;
mod view;
#[cfg(test)]
mod volume_wait_tests;
mod worker;

use std::{io, sync::Arc};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::Recipient;
use serde_json::json;
use tokio::{runtime::Handle, sync::oneshot};

pub use engine::{CriPodsSettings, PodRuntimePort, RELIST_PERIOD, default_sandboxes_at_once};
pub use nodepulse_actors::pods::cgroups::PodCgroupsSetup;
pub use pleg_health::{EVENTED_RELIST_THRESHOLD, PlegHealth, RELIST_THRESHOLD};
pub use pod_cgroups::CGROUP_HOUSEKEEPING_PERIOD;
pub use sandbox::ClusterDns;
pub use task_panics::TaskPanics;
pub use userns::{DEFAULT_IDS_PER_POD, UNIT_LENGTH, UserNamespaces};
pub use view::{
    CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL,
    RESTART_COUNT_ANNOTATION,
};

use engine::{Ending, Engine, PodEntry};
use pod_state::{End, Work};

use nodepulse_actors::pods::{PodLifecycleProvider, PodUpdate, ProviderFault, UpdateSink};
use nodepulse_actors::{
    kept_pod::KeptPod,
    messages::StopPod,
    node_status::NodeView,
    ports::{PodStats, PodsPublisher, PodsView, ProbeRunner},
    prober::{ProbePods, ProbeResults, ProberOutput},
    runtime_probe::CapabilitiesView,
    volume_manager::{PodVolumeView, SubPathHost, VolumeSourceApi},
};

pub struct CriPods {
    engine: Arc<Engine>,
    /// Dropping it ends the engine's own thread, when it has one.
    stop_thread: Option<oneshot::Sender<()>>,
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl CriPods {
    /// A provider whose tasks run on `spawner` (tests: the test's runtime, on paused time).
    pub fn new(
        settings: CriPodsSettings,
        runtime: Arc<dyn PodRuntimePort>,
        volumes: Option<Arc<dyn PodVolumeView>>,
        spawner: Handle,
    ) -> Self {
        Self {
            engine: Arc::new(Engine::new(settings, runtime, volumes, spawner)),
            stop_thread: None,
        }
    }

    /// A provider with a thread of its own for its tasks: they keep running whatever happens
    /// to the actor's arbiter (a hung instance is abandoned with it).
    pub fn on_own_thread(
        settings: CriPodsSettings,
        runtime: Arc<dyn PodRuntimePort>,
        volumes: Option<Arc<dyn PodVolumeView>>,
    ) -> io::Result<Self> {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = tokio.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("cri-pods".to_owned())
            .spawn(move || {
                tokio.block_on(async move {
                    let _ = stopped.await;
                });
            })?;
        let mut pods = Self::new(settings, runtime, volumes, handle);
        pods.stop_thread = Some(stop);
        Ok(pods)
    }

    /// Reads env ConfigMaps/Secrets, pull Secrets and the Services of service links through
    /// `api` (the volume manager's port).
    #[must_use]
    pub fn with_objects(mut self, api: Arc<dyn VolumeSourceApi>) -> Self {
        // The Services' watch starts now, as the kubelet's informer at its start: listed
        // before the first container needs them.
        let _ = api.services();
        self.engine_mut().objects = Some(api);
        self
    }

    /// Makes and binds the containers' `subPath`s through `host` (the node's disk).
    #[must_use]
    pub fn with_sub_paths(mut self, host: Arc<dyn SubPathHost>) -> Self {
        self.engine_mut().sub_paths = Some(host);
        self
    }

    /// Sends lifecycle hooks' `httpGet` requests through `runner` (the prober's HTTP client).
    #[must_use]
    pub fn with_http_hooks(mut self, runner: Arc<dyn ProbeRunner>) -> Self {
        self.engine_mut().http_hooks = Some(runner);
        self
    }

    /// Asks the runtime's handlers and features as RuntimeProbeActor publishes them in `view`
    /// (user namespaces, recursive read-only mounts); without it, the runtime can do neither.
    #[must_use]
    pub fn with_runtime_capabilities(mut self, view: Arc<CapabilitiesView>) -> Self {
        self.engine_mut().capabilities = Some(view);
        self
    }

    /// Gives `hostUsers: false` pods `ids_per_pod` IDs each (`userNamespaces.idsPerPod`), from
    /// a range that must hold `max_pods` of them.
    #[must_use]
    pub fn with_user_namespaces(mut self, ids_per_pod: u32, max_pods: u32) -> Self {
        self.engine_mut().user_namespaces = UserNamespaces::new(ids_per_pod, max_pods);
        self
    }

    /// Admits each pod against the Node `view` holds, as the kubelet does before running it.
    #[must_use]
    pub fn with_node_view(mut self, view: Arc<NodeView>) -> Self {
        self.engine_mut().node = Some(view);
        self
    }

    /// Tells `prober` each pod's running containers at every sync, and reports `started` and
    /// `ready` from its `results`.
    #[must_use]
    pub fn with_prober(mut self, prober: Recipient<ProbePods>, results: ProbeResults) -> Self {
        let engine = self.engine_mut();
        engine.prober = Some(prober);
        engine.probe_results = Some(results);
        self
    }

    /// Publishes each pod's sandboxes and containers through `publisher` (the node's
    /// [`PodsView`](nodepulse_actors::pods::PodsView)) instead of a publisher of its own.
    #[must_use]
    pub fn with_pods_view(mut self, publisher: PodsPublisher) -> Self {
        self.engine_mut().pods_view = publisher;
        self
    }

    /// Runs each pod in a cgroup of its own under the QoS cgroups (`cgroupsPerQOS`).
    #[must_use]
    pub fn with_pod_cgroups(mut self, setup: PodCgroupsSetup) -> Self {
        self.engine_mut().pod_cgroups = Some(setup);
        self
    }

    /// What this provider publishes of its pods.
    pub fn pods_view(&self) -> PodsView {
        self.engine.pods_view.view()
    }

    /// The PLEG's health, for NodeStatus's Ready (`PLEG is not healthy: ...`).
    pub fn pleg_health(&self) -> Arc<PlegHealth> {
        Arc::clone(&self.engine.pleg_health)
    }

    /// The engine while nothing else holds it (the builders run before the first pod).
    fn engine_mut(&mut self) -> &mut Engine {
        Arc::get_mut(&mut self.engine).expect("configured before any pod arrives")
    }

    fn drain(&self) -> Vec<PodUpdate> {
        std::mem::take(&mut self.engine.core().outbox)
    }
}

impl PodLifecycleProvider for CriPods {
    fn pod_applied(&mut self, kept: &KeptPod, now: Timestamp) -> Vec<PodUpdate> {
        let Some(uid) = kept.uid().map(str::to_owned) else {
            return Vec::new();
        };
        let pod = &kept.pod();
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let sync;
        {
            let mut core = self.engine.core();
            match core.pods.get_mut(&uid) {
                Some(entry) => {
                    entry.pod = Arc::clone(pod);
                    entry.kept = kept.clone();
                    if deleting && entry.ending.is_none() && !entry.end.is_finished() {
                        entry.ending = Some(Ending::Deleted);
                    }
                    // As the kubelet's pod workers: every update of a live pod is a sync.
                    sync = !entry.end.is_finished();
                    if deleting && entry.end.deleting() {
                        core.outbox
                            .push(PodUpdate::Terminated { pod: kept.clone() });
                    }
                }
                None => {
                    core.arrivals += 1;
                    let arrival = core.arrivals;
                    let status = pod.status.clone().unwrap_or_default();
                    let finished = is_terminal(pod);
                    core.pods.insert(
                        uid.clone(),
                        PodEntry {
                            pod: Arc::clone(pod),
                            kept: kept.clone(),
                            runtime: view::PodRuntime::default(),
                            errors: Default::default(),
                            start_time: status.start_time.map_or(now, |t| t.0),
                            pod_ips: status
                                .pod_ips
                                .iter()
                                .flatten()
                                .map(|ip| ip.ip.clone())
                                .collect(),
                            // One that already ran was admitted by an earlier nodepulse.
                            admitted: !matches!(status.phase.as_deref(), None | Some("Pending")),
                            work: Work::default(),
                            generation: 0,
                            retry_at: None,
                            arrival,
                            static_started: false,
                            ending: deleting.then_some(Ending::Deleted),
                            end: End::found(finished, deleting),
                            last_sent: None,
                        },
                    );
                    if finished && deleting {
                        core.outbox
                            .push(PodUpdate::Terminated { pod: kept.clone() });
                    }
                    sync = !finished;
                }
            }
            if let Some(entry) = core.pods.get(&uid) {
                self.engine
                    .pods_view
                    .record(entry.runtime.record(&entry.pod));
            }
        }
        if sync {
            self.engine.pods_arrived();
            self.engine.request_sync(&uid);
        }
        self.drain()
    }

    fn pod_deleted(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        let mut core = self.engine.core();
        let Some(entry) = core.pods.get_mut(uid) else {
            return;
        };
        if entry.end.is_finished() && entry.runtime.sandboxes.is_empty() {
            core.pods.remove(uid);
            self.engine.pods_view.forget(uid);
            drop(core);
            self.engine.release_user_namespace(uid);
            self.engine.want_cgroup_housekeeping();
            return;
        }
        entry.ending = Some(Ending::Gone);
        entry.end.reopen();
        drop(core);
        self.engine.request_sync(uid);
    }

    fn pods_listed(&mut self) {
        self.engine.pods_listed();
    }

    fn tick(&mut self, _now: Timestamp) -> Vec<PodUpdate> {
        self.drain()
    }

    /// Never: the engine's own tasks (pod workers, the PLEG) wake the actor through the update
    /// sink when they have something to report.
    fn next_wakeup(&self) -> Option<Timestamp> {
        None
    }

    fn stop_pod(&mut self, stop: &StopPod, _now: Timestamp) -> Vec<PodUpdate> {
        {
            let mut core = self.engine.core();
            let Some(entry) = core.pods.get_mut(&stop.uid) else {
                return Vec::new();
            };
            if entry.end.is_finished() {
                return Vec::new();
            }
            entry.ending = Some(Ending::Evicted {
                reason: stop.reason.clone(),
                message: stop.message.clone(),
            });
        }
        self.engine.request_sync(&stop.uid);
        self.drain()
    }

    fn prober_output(&mut self, output: &ProberOutput, _now: Timestamp) -> Vec<PodUpdate> {
        self.engine.prober_output(output);
        self.drain()
    }

    fn set_pod_cidrs(&mut self, _cidrs: &str, _now: Timestamp) -> Vec<PodUpdate> {
        // The runtime's CNI gives pods their addresses; RuntimeProbe hands it the CIDR.
        Vec::new()
    }

    fn volumes_changed(&mut self, pod_uid: &str, _now: Timestamp) -> Vec<PodUpdate> {
        self.engine.request_sync(pod_uid);
        self.drain()
    }

    fn stop(&mut self) {
        self.engine.core().stopped = true;
        self.engine.pods_present.notify_one();
        // Its tasks end with the thread's runtime; CRI calls in flight are abandoned.
        self.stop_thread.take();
    }

    fn set_update_sink(&mut self, sink: UpdateSink) {
        self.engine.core().sink = Some(sink);
        self.engine.wake();
    }

    fn inject_fault(&mut self, fault: ProviderFault) -> bool {
        self.engine.inject_fault(fault);
        true
    }

    fn active_pods(&self) -> Vec<PodStats> {
        self.engine
            .core()
            .pods
            .values()
            .filter(|entry| !entry.end.is_finished())
            .map(|entry| PodStats {
                pod: Arc::clone(&entry.pod),
                containers: None,
                processes: None,
                storage: None,
            })
            .collect()
    }

    fn debug_state(&self) -> serde_json::Value {
        let core = self.engine.core();
        let running = core
            .pods
            .values()
            .filter(|e| e.runtime.any_running())
            .count();
        let finished = core.pods.values().filter(|e| e.end.is_finished()).count();
        json!({
            "provider": "cri",
            "pods": core.pods.len(),
            "podsWithRunningContainers": running,
            "finished": finished,
            "relists": core.relists,
            "gcPasses": core.gc_passes,
            "eventedPleg": core.evented,
            "crashLoopEntries": core.crash.len(),
            "taskPanics": core.panics,
            "undeliveredUpdates": core.outbox.len(),
            "sandboxTurns": self.engine.sandbox_turns.debug_state(),
        })
    }
}
