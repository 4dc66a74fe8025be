//! What a node's actors read of the host, made once and shared by every node of a process:
//! the machine facts, the host's resource signals, the runtime client and the address
//! simulated pods report.

use std::{net::IpAddr, sync::Arc};

use nodepulse_actors::ports::{HostSignals, MachineFacts, RuntimeService};

use super::runtime::runtime;
use crate::{config::Settings, host::HostProbe, machine::ProcMachine};

#[derive(Clone)]
pub struct NodeResources {
    pub machine: Arc<dyn MachineFacts>,
    pub host: Arc<dyn HostSignals>,
    /// The container runtime; `None` for a simulated one.
    pub runtime: Option<Arc<dyn RuntimeService>>,
    pub host_ip: Option<IpAddr>,
    /// Start the Lease and status timers at a random phase: nodes started together (a fleet)
    /// then do not renew and report in step.
    pub spread_timers: bool,
    /// Why this process cannot mount a tmpfs for memory-backed volumes, if it cannot (probed
    /// once, shared by a fleet's nodes).
    pub no_tmpfs: Option<String>,
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
            no_tmpfs: crate::volume::host::probe_tmpfs(),
        }
    }
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
