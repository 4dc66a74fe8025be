//! A simulated fleet: many node agents in one process (`nodes:` in the configuration, or
//! `--nodes N`). Each node is the same supervisor subtree with the same six actors as a real
//! node; what is the same for all of them is made once and shared: the API clients and rate
//! limiters ([`KubeApi`]), one watch of the Nodes and one of their pods ([`SharedWatches`]),
//! a bounded pool of arbiter threads ([`SharedArbiters`]) and one reading of the host. Their
//! Lease and status timers start at random phases so that nodes started together do not
//! renew in step. `measure` takes the figures the benchmarks report.
//!
//! Sizing: about 95 KiB a node at 10,000 nodes, whatever `supervision.mailboxCapacity` is
//! (a mailbox's queue grows with what is queued; measured in `bench/results/fleet.json`).
//! `kubeAPIQPS` is shared by the whole fleet and paces registration (500 registers 10,000
//! nodes in about 30 s).

mod api;
mod host;
pub mod measure;
pub mod proc_stats;
mod run;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use nodepulse_actors::quantity::parse_quantity;
use nodepulse_supervisor::{SharedArbiters, Supervisor, SupervisorHandle};

pub use api::FleetApi;
pub use host::{CachedHost, CachedMachine, NodeMachine};
pub use run::run;

use crate::{
    cli::Settings,
    config::{Config, FleetNodeConfig},
    daemon::supervisor_config,
    kube_api::{KubeApi, SharedWatches},
    node::{self, NodeResources},
};

/// How long one reading of the host serves every node: well under the housekeeping and status
/// periods (10 s), so a pressure change still shows within one of them.
const HOST_READING_MAX_AGE: Duration = Duration::from_secs(1);

/// How often a fleet node's simulated pods advance: a scripted pod phase then lands within a
/// second of its time, instead of a quarter of one.
const POD_TICK: Duration = Duration::from_secs(1);

/// The generated name of the fleet's `index`-th node.
pub fn generated_name(base: &str, index: usize) -> String {
    format!("{base}-{index}")
}

/// `count` nodes: those listed under `nodes:` first, then generated ones named after
/// `base` (`<base>-<i>`) up to `count`. Fewer than the list is an error: nothing listed is
/// silently left out.
pub fn with_generated(
    listed: &[FleetNodeConfig],
    base: &str,
    count: usize,
) -> Result<Vec<FleetNodeConfig>, String> {
    if count < listed.len() {
        return Err(format!(
            "--nodes {count} is fewer than the {} nodes listed under nodes:",
            listed.len()
        ));
    }
    let mut nodes = listed.to_vec();
    let mut index = 0;
    while nodes.len() < count {
        let name = generated_name(base, index);
        index += 1;
        if !listed.iter().any(|node| node.name == name) {
            nodes.push(FleetNodeConfig {
                name,
                labels: Default::default(),
                capacity: Default::default(),
            });
        }
    }
    Ok(nodes)
}

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
        shared.pod_tick = POD_TICK;
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

/// One node: the fleet's settings under its own name, its labels over the common ones, its
/// capacity over the host's.
fn start_node(
    base: &Settings,
    api: &Arc<FleetApi>,
    shared: &NodeResources,
    arbiters: &SharedArbiters,
    node: &FleetNodeConfig,
) -> SupervisorHandle {
    let mut settings = base.clone();
    settings.node_name.clone_from(&node.name);
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
    node::actors_with(Supervisor::builder(supervision), &settings, api, &resources)
        .0
        .start()
}

/// Whether `config` asks for a fleet rather than one node.
pub fn is_fleet(config: &Config) -> bool {
    !config.nodes.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str) -> FleetNodeConfig {
        FleetNodeConfig {
            name: name.to_owned(),
            labels: [("zone".to_owned(), "a".to_owned())].into(),
            capacity: Default::default(),
        }
    }

    #[test]
    fn generated_nodes_fill_up_after_the_listed_ones_without_taking_their_names() {
        let nodes = with_generated(&[listed("sim-1")], "sim", 3).expect("enough");
        let names: Vec<&str> = nodes.iter().map(|node| node.name.as_str()).collect();
        assert_eq!(names, ["sim-1", "sim-0", "sim-2"]);
        assert_eq!(nodes[0].labels.get("zone").map(String::as_str), Some("a"));
    }

    #[test]
    fn fewer_nodes_than_listed_is_an_error() {
        let error = with_generated(&[listed("a"), listed("b")], "sim", 1).expect_err("refused");
        assert!(error.contains("fewer than the 2 nodes listed"), "{error}");
    }
}
