//! One node's actors, wired to the API port and the host and added to the node's supervisor
//! in start order: NodeStatus (it registers the Node), Lease, StatusManager and the pod
//! lifecycle actor that feeds it, then the signal actors that feed NodeStatus (RuntimeProbe,
//! EvictionSignal, which also evicts through StatusManager).

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use k8s_openapi::api::core::v1::Taint;
use nodepulse_actors::{
    eviction::{Evictions, Signal, Threshold, ThresholdValue},
    lease::{LeaseActor, LeaseSettings, renew_interval, start_phase},
    messages::FlushPodStatuses,
    node_status::{
        NodeStatusActor, NodeStatusMemory, NodeStatusSettings, PodCidrSink,
        registration::RegistrationSettings, setters::StatusSettings,
    },
    pods::{
        NoPods, PodLifecycleActor, PodLifecycleSettings, PodLifecycleState, SimulatedPods,
        SimulatedSettings, TICK, ip_pool::Cidr,
    },
    ports::{HostSignals, LeaseApi, MachineFacts, NodeApi, PodApi, PodStatsSource, RuntimeService},
    quantity::parse_quantity,
    runtime_probe::UpdatePodCidr,
    status_manager::{PodStatusStore, StatusManagerActor, StatusManagerSettings},
};
use nodepulse_supervisor::{
    ChildSpec, Drain, Kept, Mailbox, Recipient, SupervisorBuilder, mailbox,
};

use crate::{
    cli::Settings,
    config::{Config, RuntimeKind},
    host::HostProbe,
    machine::ProcMachine,
    node_signals::{eviction_settings, runtime, signal_actors_with},
};

/// The longest the first status sync waits for the runtime probe's first answer.
const FIRST_RUNTIME_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The name NodeStatusActor has in the supervisor and the debug endpoint.
pub const NODE_STATUS_ACTOR: &str = "node-status";
/// The names of StatusManagerActor and PodLifecycleActor.
pub const STATUS_MANAGER_ACTOR: &str = "status-manager";
pub const POD_LIFECYCLE_ACTOR: &str = "pod-lifecycle";

/// The configured hard threshold of `signal`, which allocatable holds back.
fn hard_threshold(thresholds: &[Threshold], signal: Signal) -> Option<ThresholdValue> {
    thresholds
        .iter()
        .find(|threshold| threshold.hard && threshold.signal == signal)
        .map(|threshold| threshold.value)
}

fn reserved(config: &Config) -> BTreeMap<String, f64> {
    let mut total = BTreeMap::new();
    for (resource, quantity) in config.system_reserved.iter().chain(&config.kube_reserved) {
        // Validated at load time; an unparsable value cannot reach here.
        let amount = parse_quantity(quantity).unwrap_or(0.0);
        *total.entry(resource.clone()).or_insert(0.0) += amount;
    }
    total
}

pub fn node_status_settings(settings: &Settings) -> NodeStatusSettings {
    let config = &settings.config;
    let thresholds = eviction_settings(config).thresholds;
    NodeStatusSettings {
        node_name: settings.node_name.clone(),
        register_node: config.register_node,
        registration: Arc::new(RegistrationSettings {
            node_labels: config.node_labels.clone(),
            taints: config
                .register_with_taints
                .iter()
                .map(|taint| Taint {
                    key: taint.key.clone(),
                    value: taint.value.clone(),
                    effect: taint.effect.clone(),
                    time_added: None,
                })
                .collect(),
            provider_id: config.provider_id.clone(),
            controller_attach_detach: config.enable_controller_attach_detach,
        }),
        status: Arc::new(StatusSettings {
            max_pods: config.max_pods,
            pods_per_core: config.pods_per_core,
            reserved: reserved(config),
            hard_eviction_memory: hard_threshold(&thresholds, Signal::MemoryAvailable),
            hard_eviction_nodefs: hard_threshold(&thresholds, Signal::NodefsAvailable),
            node_ips: config
                .node_ip
                .iter()
                .filter_map(|ip| ip.parse::<IpAddr>().ok())
                .collect(),
            port: i32::from(config.port),
            agent_version: format!("v{}", env!("CARGO_PKG_VERSION")),
            runtime_down_after: config.container_runtime_down_after.into(),
        }),
        update_frequency: config.node_status_update_frequency.into(),
        report_frequency: config.report_frequency(),
        first_runtime_wait: Some(FIRST_RUNTIME_WAIT),
        random_tick_phase: false,
    }
}

/// The addresses of one node's actors, for whoever feeds them (signal actors, tests).
pub struct NodeAddresses {
    pub node_status: Mailbox<NodeStatusActor>,
    pub lease: Mailbox<LeaseActor>,
}

/// The API ports a node's actors use; the daemon's `KubeApi`, or a fleet's view of it.
pub trait ApiPorts: NodeApi + LeaseApi + PodApi {}

impl<T: NodeApi + LeaseApi + PodApi> ApiPorts for T {}

/// What a node's actors read of the host, made once and shared by every node of a process:
/// the machine facts, the host's resource signals, the runtime client and the address
/// simulated pods report.
#[derive(Clone)]
pub struct NodeResources {
    pub machine: Arc<dyn MachineFacts>,
    pub host: Arc<dyn HostSignals>,
    pub runtime: Option<Arc<dyn RuntimeService>>,
    pub host_ip: Option<IpAddr>,
    /// Start the Lease and status timers at a random phase: nodes started together (a fleet)
    /// then do not renew and report in step.
    pub spread_timers: bool,
    /// How often the pod lifecycle provider is asked what has come due: [`TICK`] for one
    /// node; a fleet ticks less often, as 10,000 nodes × 4 ticks a second would be 40,000
    /// wakeups a second, nearly all for nodes without pods.
    pub pod_tick: std::time::Duration,
}

impl NodeResources {
    /// The real host, as `settings` describes it.
    pub fn for_host(settings: &Settings) -> Self {
        let config = &settings.config;
        Self {
            machine: Arc::new(ProcMachine::new("/", config.root_dir_on_host())),
            host: Arc::new(HostProbe::configured(config)),
            runtime: runtime(config),
            host_ip: host_ip(settings),
            spread_timers: false,
            pod_tick: TICK,
        }
    }
}

/// Adds all of the node's actors to `builder`: the API-facing pair and the signal actors that
/// feed NodeStatus.
pub fn actors<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
) -> (SupervisorBuilder, NodeAddresses) {
    actors_with(builder, settings, api, &NodeResources::for_host(settings))
}

/// [`actors`] reading the host through `resources` (shared by the nodes of a fleet).
pub fn actors_with<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
    resources: &NodeResources,
) -> (SupervisorBuilder, NodeAddresses) {
    let pod_cidr: PodCidrSink = Arc::default();
    let (builder, addresses) = api_actors_with(
        builder,
        settings,
        api,
        Some(Arc::clone(&pod_cidr)),
        resources,
    );
    let (builder, pods) = pod_actors_with(
        builder,
        settings,
        api,
        resources.host_ip,
        resources.pod_tick,
    );
    let health = addresses.node_status.recipient();
    let pressure = addresses.node_status.recipient();
    let config = &settings.config;
    let host = Arc::clone(&resources.host);
    let evictions = Evictions {
        pods: Arc::clone(&pods.state) as Arc<dyn PodStatsSource>,
        evict: pods.status_manager.recipient(),
    };
    let (builder, probe) = signal_actors_with(
        builder,
        config,
        resources.runtime.clone(),
        host,
        health,
        pressure,
        Some(evictions),
    );
    // Filled before any actor starts: the supervisor starts them only once built.
    let _ = pod_cidr.set(fan_out(probe.recipient(), pods.lifecycle.recipient()));
    (builder, addresses)
}

/// The pod CIDR goes to the runtime (whose answer forces a status PATCH) and to the pods'
/// provider (their addresses).
fn fan_out(
    runtime: Recipient<UpdatePodCidr>,
    pods: Recipient<UpdatePodCidr>,
) -> Recipient<UpdatePodCidr> {
    Recipient::from_fn(move |update: UpdatePodCidr| {
        if let Err(error) = pods.try_send(update.clone()) {
            tracing::warn!(%error, "cannot hand the pod CIDR to the pod lifecycle actor");
        }
        runtime.try_send(update)
    })
}

/// The addresses and state of one node's pod actors.
pub struct PodAddresses {
    pub status_manager: Mailbox<StatusManagerActor>,
    pub lifecycle: Mailbox<PodLifecycleActor>,
    /// The provider and its undelivered updates (the active pods, for eviction).
    pub state: Arc<PodLifecycleState>,
    /// StatusManager's versioned cache.
    pub store: Kept<PodStatusStore>,
}

/// The node's address for simulated pods' `hostIP`: the first `nodeIP`, else the host's
/// default-route address.
fn host_ip(settings: &Settings) -> Option<IpAddr> {
    let config = &settings.config;
    config
        .node_ip
        .iter()
        .find_map(|ip| ip.parse::<IpAddr>().ok())
        .or_else(|| {
            ProcMachine::new("/", config.root_dir.clone())
                .read()
                .default_route_address
        })
}

/// Adds StatusManager and the pod lifecycle actor: the simulated provider for a simulated
/// runtime, none otherwise (nodepulse runs no real containers; a CRI provider can follow).
pub fn pod_actors<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
) -> (SupervisorBuilder, PodAddresses) {
    pod_actors_with(builder, settings, api, host_ip(settings), TICK)
}

/// [`pod_actors`] with simulated pods reporting `host_ip`, advanced every `tick`.
pub fn pod_actors_with<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
    host_ip: Option<IpAddr>,
    tick: std::time::Duration,
) -> (SupervisorBuilder, PodAddresses) {
    let config = &settings.config;
    let capacity = config.supervision.mailbox_capacity;
    let (status_manager, status_manager_inbox) = mailbox::<StatusManagerActor>(capacity);
    let (lifecycle, lifecycle_inbox) = mailbox::<PodLifecycleActor>(capacity);
    let state = Arc::new(match config.runtime {
        RuntimeKind::Simulated => PodLifecycleState::new(SimulatedPods::new(SimulatedSettings {
            host_ip,
            // Validated at load time.
            fallback_cidr: Cidr::parse(&config.pod_cidr)
                .unwrap_or_else(|_| Cidr::parse("10.88.0.0/16").expect("a valid CIDR")),
        })),
        RuntimeKind::Cri => PodLifecycleState::new(NoPods),
    });
    let store = Kept::<PodStatusStore>::default();
    let pod_api: Arc<dyn PodApi> = Arc::clone(api) as Arc<dyn PodApi>;

    let manager_settings = StatusManagerSettings::new(settings.node_name.clone());
    let (manager_api, manager_store, stop) =
        (Arc::clone(&pod_api), store.clone(), lifecycle.recipient());
    let manager = ChildSpec::new(STATUS_MANAGER_ACTOR, status_manager_inbox, move || {
        StatusManagerActor::new(
            manager_settings.clone(),
            Arc::clone(&manager_api),
            manager_store.clone(),
        )
        .with_provider(stop.clone())
    });

    let lifecycle_settings = PodLifecycleSettings {
        node_name: settings.node_name.clone(),
        tick,
    };
    let (lifecycle_state, to_manager) = (Arc::clone(&state), status_manager.clone());
    let pods = ChildSpec::new(POD_LIFECYCLE_ACTOR, lifecycle_inbox, move || {
        PodLifecycleActor::new(
            lifecycle_settings.clone(),
            Arc::clone(&pod_api),
            Arc::clone(&lifecycle_state),
            to_manager.clone(),
        )
    });
    let flush = flush_pod_statuses(status_manager.clone(), settings.node_name.clone());
    let addresses = PodAddresses {
        status_manager,
        lifecycle,
        state,
        store,
    };
    let builder = builder.child(manager).child(pods).drain_on_shutdown(flush);
    (builder, addresses)
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

/// Adds NodeStatus and Lease only; whoever calls this feeds NodeStatus its inputs (tests do).
/// Each mailbox is created first, so peers can be handed each other's addresses before any of
/// them starts.
pub fn api_actors<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
    pod_cidr: Option<PodCidrSink>,
) -> (SupervisorBuilder, NodeAddresses) {
    let resources = NodeResources {
        machine: Arc::new(ProcMachine::new("/", settings.config.root_dir_on_host())),
        host: Arc::new(HostProbe::configured(&settings.config)),
        runtime: None,
        host_ip: None,
        spread_timers: false,
        pod_tick: TICK,
    };
    api_actors_with(builder, settings, api, pod_cidr, &resources)
}

/// [`api_actors`] reading the machine through `resources`, with its timers spread when it
/// says so.
pub fn api_actors_with<A: ApiPorts>(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<A>,
    pod_cidr: Option<PodCidrSink>,
    resources: &NodeResources,
) -> (SupervisorBuilder, NodeAddresses) {
    let machine = Arc::clone(&resources.machine);
    let capacity = settings.config.supervision.mailbox_capacity;
    let (node_status_address, node_status_inbox) = mailbox::<NodeStatusActor>(capacity);
    let (lease_address, lease_inbox) = mailbox::<LeaseActor>(capacity);

    let mut status_settings = node_status_settings(settings);
    status_settings.random_tick_phase = resources.spread_timers;
    let node_api: Arc<dyn NodeApi> = Arc::clone(api) as Arc<dyn NodeApi>;
    // Outlives NodeStatusActor's instances: a restart keeps the latest runtime and pressure.
    let memory = Kept::<NodeStatusMemory>::default();
    let lease_recipient = lease_address.recipient();
    let node_status = ChildSpec::new(NODE_STATUS_ACTOR, node_status_inbox, move || {
        NodeStatusActor::new(
            status_settings.clone(),
            Arc::clone(&node_api),
            Arc::clone(&machine),
            memory.clone(),
            Some(lease_recipient.clone()),
            pod_cidr.clone(),
        )
    });

    let lease_api: Arc<dyn LeaseApi> = Arc::clone(api) as Arc<dyn LeaseApi>;
    let lease_settings = LeaseSettings {
        node: settings.node_name.clone(),
        lease_duration_seconds: settings.config.node_lease_duration_seconds,
    };
    // Drawn once: only the first instance waits for its phase; a restarted one renews at once.
    let phase = resources.spread_timers.then(|| {
        let interval = renew_interval(settings.config.node_lease_duration_seconds);
        start_phase(interval, rand::random::<f64>())
    });
    let first_instance = std::sync::atomic::AtomicBool::new(true);
    let lease = ChildSpec::new("lease", lease_inbox, move || {
        let actor = LeaseActor::new(lease_settings.clone(), Arc::clone(&lease_api));
        match phase.filter(|_| first_instance.swap(false, std::sync::atomic::Ordering::Relaxed)) {
            Some(phase) => actor.with_first_wait(phase),
            None => actor,
        }
    });

    let addresses = NodeAddresses {
        node_status: node_status_address,
        lease: lease_address,
    };
    (builder.child(node_status).child(lease), addresses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn resolved(yaml: &str) -> StatusSettings {
        let config = Config::parse(yaml, Source::Embedded).expect("valid");
        let settings = Settings {
            config,
            node_name: "n".into(),
            kubeconfig: None,
            standalone: false,
        };
        Arc::unwrap_or_clone(node_status_settings(&settings).status)
    }

    #[test]
    fn allocatable_holds_back_the_configured_hard_thresholds() {
        let defaults = resolved("maxPods: 110\n");
        assert_eq!(
            defaults.hard_eviction_memory,
            Some(ThresholdValue::Quantity(100 << 20))
        );
        assert_eq!(
            defaults.hard_eviction_nodefs,
            Some(ThresholdValue::Percentage(10.0))
        );
        let configured = resolved("evictionHard:\n  memory.available: 1Gi\n");
        assert_eq!(
            configured.hard_eviction_memory,
            Some(ThresholdValue::Quantity(1 << 30))
        );
        assert_eq!(
            configured.hard_eviction_nodefs, None,
            "a partial evictionHard replaces the defaults"
        );
    }
}
