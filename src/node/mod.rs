//! One node's actors, wired to each other, to the API port and to the host, and added to the
//! node's supervisor. Every mailbox is created first (`NodeAddresses`), so each actor is handed
//! its peers' addresses before any of them starts; then the parts asked for are added in start
//! order: NodeStatus (it registers the Node) and Lease, StatusManager, the volume manager and
//! the pod lifecycle actor that feeds the first and waits for the second, the CSI plugin
//! watcher (not on fleet nodes), the prober, image GC and log rotation (on a `runtime: cri` node), then the signal actors
//! that feed NodeStatus (RuntimeProbe, EvictionSignal, which also evicts through
//! StatusManager). State that must outlive an actor's restart is created here and handed to
//! every generation by its factory.

mod cri_start;
mod csi;
mod handle;
mod image_gc;
mod log_rotation;
mod pod_cgroups;
mod pod_source;
mod prober;
mod resources;
mod runtime;
mod settings;
pub mod static_pods;
mod wiring;

use std::{num::NonZeroUsize, sync::Arc};

use nodepulse_actors::{
    eviction::{EvictionSignalActor, Evictions, PodStorageCache, WithStorage},
    image_gc::ImageGcActor,
    lease::LeaseActor,
    log_rotation::LogRotationActor,
    messages::{PressureChanged, RuntimeHealth},
    node_status::NodeStatusActor,
    pods::{PodLifecycleActor, PodsPublisher},
    ports::{CsiNodeApi, LeaseApi, MirrorPodApi, NodeApi, PodApi, PodStatsSource},
    prober::{ProbeResults, ProberActor, ProberKept},
    runtime_probe::{RuntimeProbeActor, UpdatePodCidr},
    status_manager::StatusManagerActor,
    volume_manager::VolumeManagerActor,
    volume_manager::{StorageApi, VolumeSourceApi},
};
use nodepulse_supervisor::{Mailbox, Recipient, Supervisor, SupervisorBuilder};

pub use handle::{NodeHandle, NodeViews, WiredNode};
pub use resources::NodeResources;
pub use settings::{eviction_settings, node_status_settings, supervisor_config};

use crate::config::{RuntimeKind, Settings};
use wiring::{Wiring, mailboxes};

/// The API ports a node's actors use; the daemon's `KubeApi`, or a fleet's view of it.
pub trait ApiPorts:
    NodeApi + LeaseApi + PodApi + MirrorPodApi + VolumeSourceApi + StorageApi + CsiNodeApi
{
}

impl<T: NodeApi + LeaseApi + PodApi + MirrorPodApi + VolumeSourceApi + StorageApi + CsiNodeApi>
    ApiPorts for T
{
}

/// Which of a node's actors to start. The daemon starts all of them; a test starts a part and
/// plays the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// NodeStatus and Lease.
    pub heartbeat: bool,
    /// StatusManager, the volume manager and the pod lifecycle actor.
    pub pods: bool,
    /// RuntimeProbe and EvictionSignal.
    pub signals: bool,
    /// The prober, beside the pods on a `runtime: cri` node (a simulated runtime, as a
    /// fleet's nodes, runs no containers and so no probes).
    pub prober: bool,
}

impl Parts {
    pub const ALL: Self = Self {
        heartbeat: true,
        pods: true,
        signals: true,
        prober: true,
    };
    pub const HEARTBEAT: Self = Self {
        heartbeat: true,
        pods: false,
        signals: false,
        prober: false,
    };
    pub const SIGNALS: Self = Self {
        heartbeat: false,
        pods: false,
        signals: true,
        prober: false,
    };
    pub const HEARTBEAT_AND_SIGNALS: Self = Self {
        heartbeat: true,
        pods: false,
        signals: true,
        prober: false,
    };
}

/// A node that cannot be wired as asked. A programming error of the caller, not input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WiringError {
    #[error("NodeStatus, Lease and the pod actors need an API: call NodeActors::api")]
    NoApi,
    #[error(
        "the signal actors report to NodeStatus: start it too, or call NodeActors::report_signals_to"
    )]
    NoSignalRecipient,
}

/// The addresses of one node's actors, for whoever feeds them (the actors themselves, tests).
/// A part that was not started has an address nobody reads.
#[derive(Clone)]
pub struct NodeAddresses {
    pub node_status: Mailbox<NodeStatusActor>,
    pub lease: Mailbox<LeaseActor>,
    pub status_manager: Mailbox<StatusManagerActor>,
    pub pod_lifecycle: Mailbox<PodLifecycleActor>,
    pub runtime_probe: Mailbox<RuntimeProbeActor>,
    pub eviction_signal: Mailbox<EvictionSignalActor>,
    pub volume_manager: Mailbox<VolumeManagerActor>,
    pub prober: Mailbox<ProberActor>,
    pub image_gc: Mailbox<ImageGcActor>,
    pub log_rotation: Mailbox<LogRotationActor>,
}

/// Builds one node's actors: `NodeActors::new(&settings).api(api).start()` for the whole node.
pub struct NodeActors {
    settings: Settings,
    resources: Option<NodeResources>,
    parts: Parts,
    api: Option<Arc<dyn ApiPorts>>,
    signal_reports: Option<(Recipient<RuntimeHealth>, Recipient<PressureChanged>)>,
    pod_cidr: Option<Recipient<UpdatePodCidr>>,
    plugin_watcher: bool,
    shared_pod_source: bool,
    status_syncs_in_flight: Option<NonZeroUsize>,
    volume_fetches_at_once: Option<NonZeroUsize>,
}

impl NodeActors {
    /// Every actor of the node `settings` describe, reading the real host.
    pub fn new(settings: &Settings) -> Self {
        Self {
            settings: settings.clone(),
            resources: None,
            parts: Parts::ALL,
            api: None,
            signal_reports: None,
            pod_cidr: None,
            plugin_watcher: true,
            shared_pod_source: true,
            status_syncs_in_flight: None,
            volume_fetches_at_once: None,
        }
    }

    #[must_use]
    pub fn api(mut self, api: Arc<dyn ApiPorts>) -> Self {
        self.api = Some(api);
        self
    }

    /// Reads the host through `resources` (shared by a fleet's nodes, or a test's fixtures).
    #[must_use]
    pub fn resources(mut self, resources: NodeResources) -> Self {
        self.resources = Some(resources);
        self
    }

    #[must_use]
    pub fn parts(mut self, parts: Parts) -> Self {
        self.parts = parts;
        self
    }

    /// The signal actors report here instead of to NodeStatus (tests that collect them).
    #[must_use]
    pub fn report_signals_to(
        mut self,
        health: Recipient<RuntimeHealth>,
        pressure: Recipient<PressureChanged>,
    ) -> Self {
        self.signal_reports = Some((health, pressure));
        self
    }

    /// No CSI plugin watcher (a fleet's simulated nodes): claim volumes still resolve, but
    /// no driver registers, so their pods wait.
    #[must_use]
    pub fn without_plugin_watcher(mut self) -> Self {
        self.plugin_watcher = false;
        self
    }

    /// The pod lifecycle actor and the volume manager each take their own `watch_pods` from
    /// the API port instead of one pod source (a fleet's port already shares one watch among
    /// its nodes and keeps their pods: a source per node would keep them twice).
    #[must_use]
    pub fn without_shared_pod_source(mut self) -> Self {
        self.shared_pod_source = false;
        self
    }

    /// StatusManager syncs at most `syncs` pods with the API at once instead of its default
    /// (a fleet's nodes share one client: see `FLEET_NODE_STATUS_SYNCS`).
    #[must_use]
    pub fn status_syncs_in_flight(mut self, syncs: NonZeroUsize) -> Self {
        self.status_syncs_in_flight = Some(syncs);
        self
    }

    /// VolumeManager fetches the sources of at most `fetches` volumes at once instead of all
    /// that are due (a fleet's nodes share one client: see `FLEET_NODE_VOLUME_FETCHES`).
    #[must_use]
    pub fn volume_fetches_at_once(mut self, fetches: NonZeroUsize) -> Self {
        self.volume_fetches_at_once = Some(fetches);
        self
    }

    /// NodeStatus pushes a changed pod CIDR here instead of to the runtime and the pods'
    /// provider (tests that record it).
    #[must_use]
    pub fn push_pod_cidr_to(mut self, pod_cidr: Recipient<UpdatePodCidr>) -> Self {
        self.pod_cidr = Some(pod_cidr);
        self
    }

    /// Starts the node under a supervisor configured as the settings say.
    pub fn start(self) -> Result<NodeHandle, WiringError> {
        let supervisor = supervisor_config(&self.settings.config, &self.settings.node_name);
        let (builder, node) = self.add_to(Supervisor::builder(supervisor))?;
        Ok(node.started(builder.start()))
    }

    /// Adds the node's actors to `builder` (whose configuration the caller chose).
    pub fn add_to(
        self,
        builder: SupervisorBuilder,
    ) -> Result<(SupervisorBuilder, WiredNode), WiringError> {
        let Self {
            settings,
            resources,
            parts,
            api,
            signal_reports,
            pod_cidr,
            plugin_watcher,
            shared_pod_source,
            status_syncs_in_flight,
            volume_fetches_at_once,
        } = self;
        if (parts.heartbeat || parts.pods) && api.is_none() {
            return Err(WiringError::NoApi);
        }
        let (addresses, inboxes) = mailboxes(settings.config.supervision.mailbox_capacity);
        let reports = signal_reports.or_else(|| {
            parts.heartbeat.then(|| {
                (
                    addresses.node_status.recipient(),
                    addresses.node_status.recipient(),
                )
            })
        });
        if parts.signals && reports.is_none() {
            return Err(WiringError::NoSignalRecipient);
        }
        let resources = resources.unwrap_or_else(|| NodeResources::for_host(&settings));
        let runs_containers = settings.config.runtime == RuntimeKind::Cri;
        let prober = (parts.pods && parts.prober && runs_containers).then(ProberKept::default);
        let cri = resources.cri.clone().filter(|_| runs_containers);
        let wiring = Wiring {
            settings: &settings,
            resources: &resources,
            addresses: &addresses,
            parts,
            pod_cidr,
            plugin_watcher,
            shared_pod_source,
            status_syncs_in_flight,
            volume_fetches_at_once,
            node_view: Arc::default(),
            runtime_capabilities: Arc::default(),
            pods_view: PodsPublisher::default(),
            prober,
            cri: cri.as_ref(),
            health_checks: Arc::default(),
        };
        let mut builder = builder;
        if let Some(api) = api.as_ref().filter(|_| parts.heartbeat) {
            builder = wiring.heartbeat(builder, api, inboxes.node_status, inboxes.lease);
        }
        let mut pod_state = None;
        let mut volumes = None;
        let mut images = None;
        if let Some(api) = api.filter(|_| parts.pods) {
            let (volume_memory, volume_view) = wiring.volume_memory();
            volumes = Some(volume_view.clone());
            let state = wiring.pod_state(Arc::new(volume_view), &api);
            builder = wiring.pods(
                builder,
                &api,
                (Arc::clone(&state), volume_memory),
                inboxes.status_manager,
                inboxes.pod_lifecycle,
                inboxes.volume_manager,
            );
            pod_state = Some(state);
            if let Some(kept) = wiring.prober.clone() {
                builder = wiring.prober(builder, kept, inboxes.prober);
            }
            if runs_containers {
                let (with_gc, collector) = wiring.image_gc(builder, &api, inboxes.image_gc);
                builder = wiring.log_rotation(with_gc, inboxes.log_rotation);
                images = collector;
            }
        }
        let pod_storage = PodStorageCache::default();
        if let Some(reports) = reports.filter(|_| parts.signals) {
            // The pods' storage comes from the kubelet API's summary, when one is served.
            let evictions = pod_state.map(|pods| Evictions {
                pods: Arc::new(WithStorage {
                    pods: pods as Arc<dyn PodStatsSource>,
                    storage: pod_storage.clone(),
                }),
                evict: addresses.status_manager.recipient(),
            });
            builder = wiring.signals(
                builder,
                reports,
                (evictions, images),
                inboxes.runtime_probe,
                inboxes.eviction_signal,
            );
        }
        let views = NodeViews {
            node: Arc::clone(&wiring.node_view),
            pods: wiring.pods_view.view(),
            volumes,
            probes: (wiring.prober.as_ref()).map(|kept| ProbeResults::new(kept.memory.clone())),
            pod_storage,
        };
        let runtime = cri.and_then(Result::ok);
        Ok((
            builder,
            WiredNode {
                addresses,
                runtime,
                views,
            },
        ))
    }
}
