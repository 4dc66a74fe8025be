//! What a node's actors read of the host, made once and shared by every node of a process:
//! the machine facts, the host's resource signals, the runtime client and the address
//! simulated pods report. (A fleet's nodes are simulated: they share no CRI client.)

use std::{net::IpAddr, sync::Arc};

use nodepulse_actors::ports::{HostSignals, MachineFacts, RuntimeService};

use super::runtime::{cri_client, runtime};
use crate::{
    config::{EndpointError, Settings},
    host::HostProbe,
    machine::ProcMachine,
};
use nodepulse_cri::client::CriClient;

#[derive(Clone)]
pub struct NodeResources {
    pub machine: Arc<dyn MachineFacts>,
    pub host: Arc<dyn HostSignals>,
    /// The container runtime the signal actors read; `None` for a simulated one.
    pub runtime: Option<Arc<dyn RuntimeService>>,
    /// The node's CRI client (`runtime: cri`), or why the endpoint cannot be used: the one
    /// client the pod provider, the prober and the node's handle use, and `runtime` is made of.
    pub cri: Option<Result<CriClient, EndpointError>>,
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
        let cri = cri_client(config);
        Self {
            machine: Arc::new(ProcMachine::new("/", config.root_dir_on_host())),
            host: Arc::new(HostProbe::configured(config)),
            runtime: runtime(cri.as_ref()),
            cri,
            host_ip: host_ip(settings),
            spread_timers: false,
            no_tmpfs: crate::volume_plugins::host::probe_tmpfs(),
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
