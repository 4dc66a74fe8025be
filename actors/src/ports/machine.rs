//! The host facts NodeStatusActor reports: what the kubelet gets from cAdvisor's machine info,
//! `/etc/os-release`, the kernel and the network configuration.

use std::net::IpAddr;

/// The machine as read now. Reading is cheap (a few small files and one statvfs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    pub hostname: String,
    pub cpu_cores: u32,
    pub memory_bytes: u64,
    pub machine_id: String,
    /// DMI product UUID; empty where the host has none (VMs without DMI).
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    /// PRETTY_NAME from `/etc/os-release`, "Unknown" when unreadable.
    pub os_image: String,
    /// Capacity of the filesystem holding the root dir; `None` when it cannot be measured.
    pub ephemeral_storage_bytes: Option<u64>,
    /// Every address assigned to a local interface.
    pub local_addresses: Vec<IpAddr>,
    /// The address of the interface that carries the default route.
    pub default_route_address: Option<IpAddr>,
}

/// Reads [`MachineInfo`]; the daemon's adapter reads the real host, tests use fixture trees.
pub trait MachineFacts: Send + Sync + 'static {
    /// Whatever could be read; missing facts are left empty and said in the log.
    fn read(&self) -> MachineInfo;
}
