//! How each part of a node is wired: its factories (what every generation of an actor is
//! built from, including the state kept across restarts) and its peers' addresses. Only
//! `NodeActors` calls this.

use std::{
    num::NonZeroUsize,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use nodepulse_actors::{
    eviction::{self, EvictionSignalActor, Evictions, PressureState},
    image_gc::{ImageCollector, ImageGcActor},
    lease::{self, LeaseActor, renew_interval, start_phase},
    log_rotation::LogRotationActor,
    messages::{FlushPodStatuses, PressureChanged, RuntimeHealth},
    node_status::{self, NodeStatusActor, NodeStatusMemory, NodeView},
    pods::{
        self, PodLifecycleActor, PodLifecycleSettings, PodLifecycleState, PodsPublisher,
        SimulatedPods, SimulatedSettings, StartingProvider,
    },
    ports::{HealthChecks, LeaseApi, NodeApi, PodApi, PodSource},
    prober::{ProberActor, ProberKept},
    runtime_probe::{self, CapabilitiesView, ProbeStore, RuntimeProbeActor, UpdatePodCidr},
    status_manager::{self, PodStatusStore, StatusManagerActor, StatusManagerSettings},
    volume_manager::{
        self, VolumeManagerActor, VolumeManagerMemory, VolumeManagerPeers, VolumeView,
    },
    volume_manager::{PodVolumeView, VolumeHost, VolumeSourceApi},
};
use nodepulse_supervisor::{
    ChildSpec, Drain, Inbox, Kept, Mailbox, Recipient, SupervisorBuilder, mailbox,
};

use super::{
    ApiPorts, NodeAddresses, NodeResources, Parts,
    cri_start::CriStart,
    csi::csi_ports,
    eviction_settings, node_status_settings,
    pod_source::SharedPodSource,
    settings,
    static_pods::{StaticPodSource, UrlSource, pod_streams},
};
use crate::{
    config::{EndpointError, RuntimeKind, Settings},
    volume_plugins::{csi::CsiDrivers, host::DiskVolumeHost},
};
use nodepulse_cri::client::CriClient;

/// How the Ready message names the CRI pod provider when it cannot start.
const CRI_PROVIDER: &str = "CRI pod provider";

/// Every inbox of one node, taken by the part that starts its actor.
pub(super) struct Inboxes {
    pub node_status: Inbox<NodeStatusActor>,
    pub lease: Inbox<LeaseActor>,
    pub status_manager: Inbox<StatusManagerActor>,
    pub pod_lifecycle: Inbox<PodLifecycleActor>,
    pub runtime_probe: Inbox<RuntimeProbeActor>,
    pub eviction_signal: Inbox<EvictionSignalActor>,
    pub volume_manager: Inbox<VolumeManagerActor>,
    pub prober: Inbox<ProberActor>,
    pub image_gc: Inbox<ImageGcActor>,
    pub log_rotation: Inbox<LogRotationActor>,
}

pub(super) fn mailboxes(capacity: usize) -> (NodeAddresses, Inboxes) {
    let (node_status, node_status_inbox) = mailbox(capacity);
    let (lease, lease_inbox) = mailbox(capacity);
    let (status_manager, status_manager_inbox) = mailbox(capacity);
    let (pod_lifecycle, pod_lifecycle_inbox) = mailbox(capacity);
    let (runtime_probe, runtime_probe_inbox) = mailbox(capacity);
    let (eviction_signal, eviction_signal_inbox) = mailbox(capacity);
    let (volume_manager, volume_manager_inbox) = mailbox(capacity);
    let (prober, prober_inbox) = mailbox(capacity);
    let (image_gc, image_gc_inbox) = mailbox(capacity);
    let (log_rotation, log_rotation_inbox) = mailbox(capacity);
    (
        NodeAddresses {
            node_status,
            lease,
            status_manager,
            pod_lifecycle,
            runtime_probe,
            eviction_signal,
            volume_manager,
            prober,
            image_gc,
            log_rotation,
        },
        Inboxes {
            node_status: node_status_inbox,
            lease: lease_inbox,
            status_manager: status_manager_inbox,
            pod_lifecycle: pod_lifecycle_inbox,
            runtime_probe: runtime_probe_inbox,
            eviction_signal: eviction_signal_inbox,
            volume_manager: volume_manager_inbox,
            prober: prober_inbox,
            image_gc: image_gc_inbox,
            log_rotation: log_rotation_inbox,
        },
    )
}

/// What every part's factory is built from.
pub(super) struct Wiring<'a> {
    pub settings: &'a Settings,
    pub resources: &'a NodeResources,
    pub addresses: &'a NodeAddresses,
    pub parts: Parts,
    /// Where NodeStatus pushes a changed pod CIDR, when not to its peers.
    pub pod_cidr: Option<Recipient<UpdatePodCidr>>,
    /// Whether CSI drivers may register on this node (not on a fleet's simulated nodes).
    pub plugin_watcher: bool,
    /// Whether the pod actors subscribe to one pod source (else each watches on its own).
    pub shared_pod_source: bool,
    /// StatusManager's pod syncs at once, when not its default.
    pub status_syncs_in_flight: Option<NonZeroUsize>,
    /// VolumeManager's fetches at once, when bounded.
    pub volume_fetches_at_once: Option<NonZeroUsize>,
    /// The Node NodeStatus shares with the pods' provider (admission).
    pub node_view: Arc<NodeView>,
    /// The runtime's handlers and features RuntimeProbe shares with the pods' provider.
    pub runtime_capabilities: Arc<CapabilitiesView>,
    /// Where the CRI provider publishes its pods for readers outside the actors.
    pub pods_view: PodsPublisher,
    /// The prober's kept state, when this node runs one (`runtime: cri` with the pods).
    pub prober: Option<ProberKept>,
    /// The node's CRI client (`runtime: cri`), or why the endpoint cannot be used.
    pub cri: Option<&'a Result<CriClient, EndpointError>>,
    /// The runtime-state health checks NodeStatus's Ready asks (the CRI engine's PLEG).
    pub health_checks: Arc<HealthChecks>,
}

impl Wiring<'_> {
    /// NodeStatus, then Lease.
    pub fn heartbeat(
        &self,
        builder: SupervisorBuilder,
        api: &Arc<dyn ApiPorts>,
        node_status_inbox: Inbox<NodeStatusActor>,
        lease_inbox: Inbox<LeaseActor>,
    ) -> SupervisorBuilder {
        let config = &self.settings.config;
        let mut status_settings = node_status_settings(self.settings);
        status_settings.random_tick_phase = self.resources.spread_timers;
        let node_api: Arc<dyn NodeApi> = Arc::clone(api) as Arc<dyn NodeApi>;
        let machine = Arc::clone(&self.resources.machine);
        // Outlives NodeStatusActor's instances: a restart keeps the latest runtime and pressure.
        let memory = Kept::<NodeStatusMemory>::default();
        let lease = self.addresses.lease.recipient();
        let pod_cidr = self.pod_cidr_recipient();
        // The volume manager runs with the pod actors; it needs `volumesAttached`.
        let volumes = self
            .parts
            .pods
            .then(|| self.addresses.volume_manager.recipient());
        let node_view = Arc::clone(&self.node_view);
        let health_checks = Arc::clone(&self.health_checks);
        let node_status = ChildSpec::new(node_status::NAME, node_status_inbox, move || {
            let actor = NodeStatusActor::new(
                status_settings.clone(),
                Arc::clone(&node_api),
                Arc::clone(&machine),
                memory.clone(),
                Some(lease.clone()),
                pod_cidr.clone(),
            );
            let actor = actor
                .with_node_view(Arc::clone(&node_view))
                .with_health_checks(Arc::clone(&health_checks));
            match &volumes {
                Some(volumes) => actor.with_volume_manager(volumes.clone()),
                None => actor,
            }
        });

        let lease_api: Arc<dyn LeaseApi> = Arc::clone(api) as Arc<dyn LeaseApi>;
        let lease_settings = settings::lease_settings(self.settings);
        // Drawn once: only the first instance waits for its phase; a restarted one renews at once.
        let phase = self.resources.spread_timers.then(|| {
            let interval = renew_interval(config.node_lease_duration_seconds);
            start_phase(interval, rand::random::<f64>())
        });
        let first_instance = AtomicBool::new(true);
        let lease = ChildSpec::new(lease::NAME, lease_inbox, move || {
            let actor = LeaseActor::new(lease_settings.clone(), Arc::clone(&lease_api));
            match phase.filter(|_| first_instance.swap(false, Ordering::Relaxed)) {
                Some(phase) => actor.with_first_wait(phase),
                None => actor,
            }
        });
        builder.child(node_status).child(lease)
    }

    /// Where NodeStatus pushes a changed pod CIDR: the runtime (whose answer forces a status
    /// PATCH) and the pods' provider (their addresses), whichever of them runs.
    fn pod_cidr_recipient(&self) -> Option<Recipient<UpdatePodCidr>> {
        if let Some(pod_cidr) = &self.pod_cidr {
            return Some(pod_cidr.clone());
        }
        let runtime = self
            .parts
            .signals
            .then(|| self.addresses.runtime_probe.recipient());
        let pods = self
            .parts
            .pods
            .then(|| self.addresses.pod_lifecycle.recipient());
        match (runtime, pods) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one),
            (Some(runtime), Some(pods)) => {
                Some(Recipient::from_fn(move |update: UpdatePodCidr| {
                    if let Err(error) = pods.try_send(update.clone()) {
                        tracing::warn!(%error, "cannot hand the pod CIDR to the pod lifecycle actor");
                    }
                    runtime.try_send(update)
                }))
            }
        }
    }

    /// The volume manager's memory (kept across its restarts) and the view of it the pods'
    /// provider reads.
    pub fn volume_memory(&self) -> (Kept<VolumeManagerMemory>, VolumeView) {
        let memory = Kept::<VolumeManagerMemory>::default();
        let volume_settings = settings::volume_manager_settings(self.settings);
        let view = VolumeView::new(
            memory.clone(),
            volume_settings.node_name,
            volume_settings.dirs,
        );
        (memory, view)
    }

    /// The pods' provider: simulated pods for a simulated runtime, real ones on the CRI
    /// runtime otherwise; either starts a pod's containers once `volumes` says its volumes are
    /// set up. Shared with eviction, which ranks the active pods.
    pub fn pod_state(
        &self,
        volumes: Arc<dyn PodVolumeView>,
        api: &Arc<dyn ApiPorts>,
    ) -> Arc<PodLifecycleState> {
        let config = &self.settings.config;
        Arc::new(match config.runtime {
            RuntimeKind::Simulated => PodLifecycleState::new(
                SimulatedPods::new(SimulatedSettings {
                    host_ip: self.resources.host_ip,
                    fallback_cidr: settings::fallback_pod_cidr(config),
                })
                .with_volumes(volumes),
            ),
            // A start that fails keeps the node NotReady, saying why, and is tried again.
            RuntimeKind::Cri => {
                let start = self.cri_start(volumes, api).into_start();
                let pods = StartingProvider::new(CRI_PROVIDER, start, jiff::Timestamp::now());
                self.health_checks.add(pods.health());
                PodLifecycleState::new(pods)
            }
        })
    }

    /// What the CRI provider is built from (again, after a failed start): the node's CRI
    /// client; containers mount what the volume manager set up (`volumes`) and read
    /// ConfigMaps and Secrets through the volume manager's port; pods are admitted against the
    /// Node NodeStatus shares, when this node runs NodeStatus; its pods are published in the
    /// node's `PodsView`.
    fn cri_start(&self, volumes: Arc<dyn PodVolumeView>, api: &Arc<dyn ApiPorts>) -> CriStart {
        CriStart {
            config: self.settings.config.clone(),
            client: self.cri.cloned(),
            host_ip: self.resources.host_ip,
            machine: Arc::clone(&self.resources.machine),
            volumes,
            api: Arc::clone(api),
            prober: (self.prober.clone()).map(|kept| (self.addresses.prober.recipient(), kept)),
            node_view: self.parts.heartbeat.then(|| Arc::clone(&self.node_view)),
            runtime_capabilities: (self.parts.heartbeat)
                .then(|| Arc::clone(&self.runtime_capabilities)),
            health_checks: Arc::clone(&self.health_checks),
            pods_view: self.pods_view.clone(),
        }
    }

    /// VolumeManager: pods' volumes on disk under `rootDir`, `volumesInUse` to NodeStatus,
    /// changed readiness to the pod lifecycle actor.
    fn volume_manager(
        &self,
        api: &Arc<dyn ApiPorts>,
        memory: Kept<VolumeManagerMemory>,
        inbox: Inbox<VolumeManagerActor>,
        (drivers, source): (CsiDrivers, Option<Arc<dyn PodSource>>),
    ) -> ChildSpec<VolumeManagerActor> {
        let mut volume_settings = settings::volume_manager_settings(self.settings);
        volume_settings.fetches_at_once = self.volume_fetches_at_once;
        let host: Arc<dyn VolumeHost> = Arc::new(DiskVolumeHost::with_tmpfs(
            volume_settings.dirs.clone(),
            self.resources.no_tmpfs.clone(),
        ));
        let pod_api: Arc<dyn PodApi> = Arc::clone(api) as Arc<dyn PodApi>;
        let sources: Arc<dyn VolumeSourceApi> = Arc::clone(api) as Arc<dyn VolumeSourceApi>;
        let csi = csi_ports(api, volume_settings.dirs.clone(), drivers);
        let peers = VolumeManagerPeers {
            node_status: self
                .parts
                .heartbeat
                .then(|| self.addresses.node_status.recipient()),
            pod_lifecycle: Some(self.addresses.pod_lifecycle.recipient()),
        };
        ChildSpec::new(volume_manager::NAME, inbox, move || {
            let actor = VolumeManagerActor::new(
                volume_settings.clone(),
                Arc::clone(&pod_api),
                Arc::clone(&sources),
                Arc::clone(&host),
                memory.clone(),
                peers.clone(),
            )
            .with_csi(csi.clone());
            match &source {
                Some(source) => actor.with_pod_source(Arc::clone(source)),
                None => actor,
            }
        })
    }

    /// StatusManager, the volume manager, then the pod lifecycle actor that feeds the first
    /// and waits for the second; and the shutdown drain that sends every pod status the API
    /// lacks.
    pub fn pods(
        &self,
        builder: SupervisorBuilder,
        api: &Arc<dyn ApiPorts>,
        (state, volume_memory): (Arc<PodLifecycleState>, Kept<VolumeManagerMemory>),
        status_manager_inbox: Inbox<StatusManagerActor>,
        pod_lifecycle_inbox: Inbox<PodLifecycleActor>,
        volume_manager_inbox: Inbox<VolumeManagerActor>,
    ) -> SupervisorBuilder {
        let drivers = CsiDrivers::default();
        let source = self
            .shared_pod_source
            .then(|| pod_source(api, self.settings, self.addresses))
            .flatten();
        let shared = source.clone().map(|source| source as Arc<dyn PodSource>);
        let volumes = self.volume_manager(
            api,
            volume_memory,
            volume_manager_inbox,
            (drivers.clone(), shared.clone()),
        );
        let dirs = settings::volume_manager_settings(self.settings).dirs;
        let watcher = self
            .plugin_watcher
            .then(|| self.plugin_watcher(api, &dirs, drivers));
        let node_name = &self.settings.node_name;
        let pod_api: Arc<dyn PodApi> = Arc::clone(api) as Arc<dyn PodApi>;
        let store = Kept::<PodStatusStore>::default();
        let mut manager_settings = StatusManagerSettings::new(node_name.clone());
        if let Some(syncs) = self.status_syncs_in_flight {
            manager_settings.max_in_flight = syncs.get();
        }
        let (manager_api, stop) = (
            Arc::clone(&pod_api),
            self.addresses.pod_lifecycle.recipient(),
        );
        let manager = ChildSpec::new(status_manager::NAME, status_manager_inbox, move || {
            StatusManagerActor::new(
                manager_settings.clone(),
                Arc::clone(&manager_api),
                store.clone(),
            )
            .with_provider(stop.clone())
        });

        let lifecycle_settings = PodLifecycleSettings {
            node_name: node_name.clone(),
        };
        let to_manager = self.addresses.status_manager.clone();
        let lifecycle_state = Arc::clone(&state);
        let lifecycle = ChildSpec::new(pods::NAME, pod_lifecycle_inbox, move || {
            let actor = PodLifecycleActor::new(
                lifecycle_settings.clone(),
                Arc::clone(&pod_api),
                Arc::clone(&lifecycle_state),
                to_manager.clone(),
            );
            match &shared {
                Some(source) => actor.with_pod_source(Arc::clone(source)),
                None => actor,
            }
        });
        let flush = flush_pod_statuses(self.addresses.status_manager.clone(), node_name.clone());
        let stop = stop_provider(Arc::clone(&state));
        let builder = builder.child(manager).child(volumes).child(lifecycle);
        let builder = match watcher {
            Some(watcher) => builder.child(watcher),
            None => builder,
        };
        let builder = builder.drain_on_shutdown(stop).drain_on_shutdown(flush);
        match source {
            Some(source) => builder.drain_on_shutdown(stop_pod_source(source)),
            None => builder,
        }
    }

    /// RuntimeProbe, then EvictionSignal, reporting to `reports`, deleting unused images
    /// through `images` before a disk eviction.
    pub fn signals(
        &self,
        builder: SupervisorBuilder,
        (health, pressure): (Recipient<RuntimeHealth>, Recipient<PressureChanged>),
        (evictions, images): (Option<Evictions>, Option<ImageCollector>),
        runtime_probe_inbox: Inbox<RuntimeProbeActor>,
        eviction_signal_inbox: Inbox<EvictionSignalActor>,
    ) -> SupervisorBuilder {
        let config = &self.settings.config;
        let runtime = self.resources.runtime.clone();
        let probe_settings = settings::runtime_probe_settings(config);
        let probe_runtime = runtime.clone();
        let probe_store = Kept::<ProbeStore>::default();
        let capabilities = Arc::clone(&self.runtime_capabilities);
        let probe = ChildSpec::new(runtime_probe::NAME, runtime_probe_inbox, move || {
            RuntimeProbeActor::new(
                probe_settings.clone(),
                probe_runtime.clone(),
                health.clone(),
                probe_store.clone(),
            )
            .with_capabilities_view(Arc::clone(&capabilities))
        });

        let eviction_settings = eviction_settings(config);
        let host = Arc::clone(&self.resources.host);
        let pressure_state = Kept::<PressureState>::default();
        let eviction = ChildSpec::new(eviction::NAME, eviction_signal_inbox, move || {
            let actor = EvictionSignalActor::new(
                eviction_settings.clone(),
                Arc::clone(&host),
                runtime.clone(),
                pressure.clone(),
                pressure_state.clone(),
            );
            let actor = match &images {
                Some(images) => actor.with_image_reclaim(images.clone()),
                None => actor,
            };
            match &evictions {
                Some(evictions) => actor.with_evictions(evictions.clone()),
                None => actor,
            }
        });
        builder.child(probe).child(eviction)
    }
}

/// The node's one pod source, which the pod lifecycle actor and the volume manager subscribe
/// to: the API watch of the pods bound to the node (mirror pods left out) and, with a
/// `staticPodPath` or a `staticPodURL`, their manifests' pods, followed on the runtime the node is started on.
/// Outside a tokio runtime (nothing to follow it on) each actor watches on its own.
fn pod_source(
    api: &Arc<dyn ApiPorts>,
    settings: &Settings,
    addresses: &NodeAddresses,
) -> Option<Arc<SharedPodSource>> {
    tokio::runtime::Handle::try_current().ok()?;
    let config = &settings.config;
    let url = config.static_pod_url().map(|url| UrlSource {
        url: url.to_owned(),
        headers: (config.static_pod_url_header.iter())
            .flat_map(|(name, values)| values.iter().map(|value| (name.clone(), value.clone())))
            .collect(),
        period: config.http_check_frequency.0,
        tls: None,
    });
    let path =
        (config.static_pod_path()).map(|path| (path.to_owned(), config.file_check_frequency.0));
    let static_pods = (path.is_some() || url.is_some()).then(|| StaticPodSource {
        path,
        url,
        node: settings.node_name.clone(),
        status_manager: addresses.status_manager.recipient(),
    });
    let (streams, feeders) = pod_streams(api, &settings.node_name, static_pods);
    Some(Arc::new(
        SharedPodSource::start(streams).stopping_with_it(feeders),
    ))
}

/// At shutdown, with the provider stopped: the pod source stops following the API, so no
/// pod event reaches an actor that winds down.
fn stop_pod_source(source: Arc<SharedPodSource>) -> Drain {
    Box::new(move || {
        source.stop();
        Box::pin(async {})
    })
}

/// At shutdown: the pod provider stops acting on the runtime (what runs keeps running, for the
/// next nodepulse to adopt), so nothing starts or stops a container while the node winds down.
fn stop_provider(state: Arc<PodLifecycleState>) -> Drain {
    Box::new(move || {
        state.provider().stop();
        Box::pin(async {})
    })
}

/// At shutdown, before the actors stop: every pod status the API lacks is sent, so a status
/// decided just before a SIGTERM is not left for the next process to rediscover.
fn flush_pod_statuses(status_manager: Mailbox<StatusManagerActor>, node: String) -> Drain {
    Box::new(move || {
        let (status_manager, node) = (status_manager.clone(), node.clone());
        Box::pin(async move {
            match status_manager.request(FlushPodStatuses).await {
                Ok(Some(0)) => tracing::info!(%node, "every pod status is in the API"),
                Ok(Some(unsent)) => {
                    tracing::warn!(%node, unsent, "the API refused pod statuses at shutdown; they were not written");
                }
                Ok(None) | Err(_) => {
                    tracing::warn!(%node, "StatusManager ended before it flushed the pod statuses");
                }
            }
        })
    })
}
