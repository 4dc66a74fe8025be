//! A simulated fleet: many node agents in one process (`nodes:` in the configuration, or
//! `--nodes N`). Each node is the same supervisor subtree as a simulated node's, with its seven
//! actors (all but the CSI plugin watcher); what is the same for all of them is made once and
//! shared: the API clients and rate limiters ([`KubeApi`]), one watch of the Nodes and one of
//! their pods ([`SharedWatches`]), a bounded pool of arbiter threads ([`SharedArbiters`]) and
//! one reading of the host. Their Lease and status timers start at random phases so that nodes
//! started together do not renew in step. `measure` takes the figures the benchmarks report.
//!
//! Sizing: about 54 KiB of live heap a node, whatever `supervision.mailboxCapacity` is (a
//! mailbox's queue grows with what is queued); resident memory follows the start's heap peak,
//! which the fleet's bound on requests in flight keeps down (docs/benchmarks/fleet.md).
//! `kubeAPIQPS` is shared by the whole fleet and paces registration; by default it grows with
//! the fleet (`Config::effective_api_qps`: 500 registers 10,000 nodes in about 20–30 s), and
//! each of its two clients holds at most `FLEET_REQUESTS_IN_FLIGHT` requests in flight.

mod api;
mod host;
pub mod measure;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use nodepulse_actors::quantity::parse_quantity;
use nodepulse_supervisor::{SharedArbiters, Supervisor, SupervisorHandle};

pub use api::FleetApi;
pub use host::{CachedHost, CachedMachine, NodeMachine};

use crate::{
    apiserver_client::{KubeApi, SharedWatches},
    config::{FLEET_NODE_STATUS_SYNCS, FLEET_NODE_VOLUME_FETCHES, FleetNodeConfig, Settings},
    node::{NodeActors, NodeResources, supervisor_config},
};

/// How long one reading of the host serves every node: well under the housekeeping and status
/// periods (10 s), so a pressure change still shows within one of them.
const HOST_READING_MAX_AGE: Duration = Duration::from_secs(1);

/// How a fleet runs, beyond its configuration.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Arbiter threads shared by every node's actors.
    pub arbiters: usize,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            arbiters: std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
        }
    }
}

/// The running fleet.
pub struct Fleet {
    nodes: Vec<SupervisorHandle>,
    api: Arc<FleetApi>,
    arbiters: SharedArbiters,
    started: Instant,
}

impl Fleet {
    /// Starts every node of `settings.config.nodes` on `api`. Must be called inside a running
    /// actix `System`; the shared watches and arbiters live as long as the fleet.
    pub fn start(settings: &Settings, api: Arc<KubeApi>, options: &FleetOptions) -> Self {
        let started = Instant::now();
        let nodes = &settings.config.nodes;
        let watches = SharedWatches::start(&api, nodes.iter().map(|node| node.name.clone()));
        let api = Arc::new(FleetApi::new(api, watches));
        let arbiters = SharedArbiters::new(options.arbiters);
        // Each node's settings are the fleet's without the list (10,000 copies of a
        // 10,000-entry list would cost more than the nodes themselves).
        let mut base = settings.clone();
        base.config.nodes = Vec::new();
        let mut shared = NodeResources::for_host(&base);
        shared.machine = Arc::new(CachedMachine::new(shared.machine, HOST_READING_MAX_AGE));
        shared.host = Arc::new(CachedHost::new(shared.host, HOST_READING_MAX_AGE));
        shared.spread_timers = true;
        let handles = nodes
            .iter()
            .map(|node| start_node(&base, &api, &shared, &arbiters, node))
            .collect();
        tracing::info!(nodes = nodes.len(), threads = options.arbiters, elapsed = ?started.elapsed(), "fleet started");
        Self {
            nodes: handles,
            api,
            arbiters,
            started,
        }
    }

    /// Every node's supervisor, for the debug endpoint.
    pub fn handles(&self) -> &[SupervisorHandle] {
        &self.nodes
    }

    pub fn api(&self) -> &Arc<FleetApi> {
        &self.api
    }

    pub fn arbiters(&self) -> &SharedArbiters {
        &self.arbiters
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Stops every node, all at once; whether all stopped before `deadline`.
    pub async fn shutdown(&self, deadline: Duration) -> bool {
        let stops = self.nodes.iter().map(|node| node.shutdown(deadline));
        futures::future::join_all(stops)
            .await
            .into_iter()
            .all(|stopped| stopped)
    }
}

/// Where a fleet node keeps its pods' directories: two nodes never share one `pods/`.
pub fn node_root_dir(root_dir: &std::path::Path, node: &str) -> std::path::PathBuf {
    root_dir.join("nodes").join(node)
}

/// One node: the fleet's settings under its own name, its labels over the common ones, its
/// capacity over the host's, its pods' volumes under its own `<rootDir>/nodes/<name>` (the
/// host's resources, measured once at `rootDir`, are shared).
fn start_node(
    base: &Settings,
    api: &Arc<FleetApi>,
    shared: &NodeResources,
    arbiters: &SharedArbiters,
    node: &FleetNodeConfig,
) -> SupervisorHandle {
    let mut settings = base.clone();
    settings.node_name.clone_from(&node.name);
    settings.config.root_dir = node_root_dir(&base.config.root_dir, &node.name);
    settings.config.node_labels.extend(
        node.labels
            .iter()
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    let capacity = |resource: &str| {
        node.capacity
            .get(resource)
            .and_then(|quantity| parse_quantity(quantity).ok())
    };
    let mut resources = shared.clone();
    resources.machine = Arc::new(NodeMachine {
        shared: Arc::clone(&shared.machine),
        hostname: node.name.clone(),
        // Validated: positive quantities; cores are whole as the machine reports them.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        cpu_cores: capacity("cpu").map(|cores| cores.ceil() as u32),
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        memory_bytes: capacity("memory").map(|bytes| bytes as u64),
    });
    let mut supervision = supervisor_config(&settings.config, &node.name);
    supervision.shared_arbiters = Some(arbiters.clone());
    let api: Arc<dyn crate::node::ApiPorts> = Arc::clone(api) as _;
    let (builder, _node) = NodeActors::new(&settings)
        .api(api)
        .resources(resources)
        .without_plugin_watcher()
        .without_shared_pod_source()
        .status_syncs_in_flight(FLEET_NODE_STATUS_SYNCS)
        .volume_fetches_at_once(FLEET_NODE_VOLUME_FETCHES)
        .add_to(Supervisor::builder(supervision))
        // The whole node with an API: nothing for the wiring to refuse.
        .expect("a whole node is wired");
    builder.start()
}
