//! The status setters, in the kubelet's order: addresses, machine info, version info, daemon
//! endpoints, images, runtime handlers and features, then the conditions MemoryPressure,
//! DiskPressure, PIDPressure and Ready. Ready is last on purpose: the pressure setters append new conditions, so a fresh Node lists Ready
//! last, which old control planes relied on (kubernetes#16961). Every setter runs even when an
//! earlier one failed; errors are collected, and setters return the events they want recorded
//! instead of recording them.

mod addresses;
mod conditions;
mod images;
mod machine;
mod runtime_handlers;
#[cfg(test)]
mod tests;
mod version;
mod volumes;

use std::{collections::BTreeMap, net::IpAddr};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

pub use conditions::{RUNTIME_DOWN_AFTER, ready_errors};
pub use images::{MAX_IMAGES, MAX_NAMES_PER_IMAGE, node_images};
pub use version::platform;

pub use crate::ports::NodeEvent;
use crate::{
    eviction::ThresholdValue,
    messages::{PressureChanged, RuntimeHealth},
    ports::MachineInfo,
};

/// Settings the setters apply, resolved from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSettings {
    pub max_pods: u32,
    pub pods_per_core: u32,
    /// systemReserved + kubeReserved, per resource (bytes, cores or PIDs).
    pub reserved: BTreeMap<String, f64>,
    /// The hard eviction thresholds that allocatable holds back (`memory.available`,
    /// `nodefs.available`), as configured in `evictionHard`.
    pub hard_eviction_memory: Option<ThresholdValue>,
    pub hard_eviction_nodefs: Option<ThresholdValue>,
    /// Configured node IPs (`nodeIP`); empty to pick the default-route address.
    pub node_ips: Vec<IpAddr>,
    pub port: i32,
    /// `nodeInfo.kubeletVersion`: nodepulse's version.
    pub agent_version: String,
    /// No full runtime success for this long: "container runtime is down".
    pub runtime_down_after: std::time::Duration,
}

/// Everything a status computation looks at.
pub struct StatusInputs<'a> {
    pub node_name: &'a str,
    pub machine: &'a MachineInfo,
    pub settings: &'a StatusSettings,
    /// `None` until RuntimeProbeActor has said anything.
    pub runtime: Option<&'a RuntimeHealth>,
    /// `None` until EvictionSignalActor has said anything: no pressure is assumed.
    pub pressure: Option<&'a PressureChanged>,
    /// The boot ID last reported, to notice a reboot.
    pub previous_boot_id: Option<&'a str>,
    /// For judging the runtime's staleness.
    pub now_instant: Instant,
    /// The runtime-state health checks that are unhealthy (`PLEG is not healthy: ...`).
    pub health: &'a [String],
    /// The volume manager's `volumesInUse`; `None` until its reconciler synced once.
    pub volumes_in_use: Option<&'a [String]>,
}

/// Why a setter left its part of the status as it was. Each comes from the configuration or
/// the host, so the next computation meets it again until that changes; retrying does not help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetterError {
    #[error("node IP {ip}: must not be loopback, multicast, link-local or unspecified")]
    UnusableNodeIp { ip: IpAddr },
    #[error("node IP: {:?} not found in the host's network interfaces", .ip.to_string())]
    NodeIpNotOnHost { ip: IpAddr },
    #[error("can't get ip address of node {node}")]
    NoNodeAddress { node: String },
    #[error("machine info is incomplete: cpu or memory could not be read")]
    IncompleteMachineInfo,
}

/// What one setter did: the events it wants recorded, or why it changed nothing.
pub type SetterResult = Result<Vec<NodeEvent>, SetterError>;

/// What running the setters produced besides the Node itself.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SetterReport {
    pub events: Vec<NodeEvent>,
    pub errors: Vec<SetterError>,
}

/// Runs every setter on `node` in order.
pub fn run_setters(inputs: &StatusInputs<'_>, now: Timestamp, node: &mut Node) -> SetterReport {
    let mut report = SetterReport::default();
    let mut record = |result: SetterResult| match result {
        Ok(events) => report.events.extend(events),
        Err(error) => report.errors.push(error),
    };
    record(addresses::set(inputs, node));
    record(machine::set(inputs, node));
    record(version::set(inputs, node));
    record(images::set(inputs, node));
    // GoRuntime (architecture, OS) is part of machine; then RuntimeHandlers and NodeFeatures.
    record(runtime_handlers::set(inputs, node));
    for pressure in &conditions::PRESSURES {
        record(Ok(conditions::set_pressure(pressure, inputs, now, node)));
    }
    record(Ok(conditions::set_ready(inputs, now, node)));
    // After Ready, as in the kubelet's list; it touches no condition.
    record(volumes::set(inputs, node));
    report
}
