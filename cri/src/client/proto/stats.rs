//! CRI `runtime.v1` stats messages: ContainerStats, ListContainerStats, PodSandboxStats and
//! ListPodSandboxStats, as the kubelet's stats provider reads them. Field numbers are those of
//! cri-api's `api.proto`; the Windows fields and the PSI figures are left out (prost skips them).

use std::collections::HashMap;

use super::{ContainerMetadata, FilesystemUsage, PodSandboxMetadata, UInt64Value};

/// `ContainerStatsRequest { string container_id = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatsRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

/// `ContainerStatsResponse { ContainerStats stats = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatsResponse {
    #[prost(message, optional, tag = "1")]
    pub stats: Option<ContainerStats>,
}

/// `ContainerStatsFilter`: all given fields must match.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatsFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    #[prost(map = "string, string", tag = "3")]
    pub label_selector: HashMap<String, String>,
}

/// `ListContainerStatsRequest { ContainerStatsFilter filter = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainerStatsRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<ContainerStatsFilter>,
}

/// `ListContainerStatsResponse { repeated ContainerStats stats = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainerStatsResponse {
    #[prost(message, repeated, tag = "1")]
    pub stats: Vec<ContainerStats>,
}

/// `ContainerAttributes`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerAttributes {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(map = "string, string", tag = "3")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "4")]
    pub annotations: HashMap<String, String>,
}

/// `ContainerStats`: attributes (1), cpu (2), memory (3), writable layer (4), swap (5); io (6)
/// carries PSI only and is not read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStats {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<ContainerAttributes>,
    #[prost(message, optional, tag = "2")]
    pub cpu: Option<CpuUsage>,
    #[prost(message, optional, tag = "3")]
    pub memory: Option<MemoryUsage>,
    #[prost(message, optional, tag = "4")]
    pub writable_layer: Option<FilesystemUsage>,
    #[prost(message, optional, tag = "5")]
    pub swap: Option<SwapUsage>,
}

/// `CpuUsage` (psi = 4 not read)
#[derive(Clone, PartialEq, prost::Message)]
pub struct CpuUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub usage_core_nano_seconds: Option<UInt64Value>,
    #[prost(message, optional, tag = "3")]
    pub usage_nano_cores: Option<UInt64Value>,
}

/// `MemoryUsage` (psi = 8 not read)
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemoryUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub working_set_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "3")]
    pub available_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "4")]
    pub usage_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "5")]
    pub rss_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "6")]
    pub page_faults: Option<UInt64Value>,
    #[prost(message, optional, tag = "7")]
    pub major_page_faults: Option<UInt64Value>,
}

/// `SwapUsage`
#[derive(Clone, PartialEq, prost::Message)]
pub struct SwapUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub swap_available_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "3")]
    pub swap_usage_bytes: Option<UInt64Value>,
}

/// `PodSandboxStatsRequest { string pod_sandbox_id = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatsRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// `PodSandboxStatsResponse { PodSandboxStats stats = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatsResponse {
    #[prost(message, optional, tag = "1")]
    pub stats: Option<PodSandboxStats>,
}

/// `PodSandboxStatsFilter`: all given fields must match.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatsFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(map = "string, string", tag = "2")]
    pub label_selector: HashMap<String, String>,
}

/// `ListPodSandboxStatsRequest { PodSandboxStatsFilter filter = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxStatsRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<PodSandboxStatsFilter>,
}

/// `ListPodSandboxStatsResponse { repeated PodSandboxStats stats = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxStatsResponse {
    #[prost(message, repeated, tag = "1")]
    pub stats: Vec<PodSandboxStats>,
}

/// `PodSandboxAttributes`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxAttributes {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(map = "string, string", tag = "3")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "4")]
    pub annotations: HashMap<String, String>,
}

/// `PodSandboxStats`: attributes (1) and the Linux stats (2); windows (3) is not read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStats {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<PodSandboxAttributes>,
    #[prost(message, optional, tag = "2")]
    pub linux: Option<LinuxPodSandboxStats>,
}

/// `LinuxPodSandboxStats` (io = 6, PSI only, not read)
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxPodSandboxStats {
    #[prost(message, optional, tag = "1")]
    pub cpu: Option<CpuUsage>,
    #[prost(message, optional, tag = "2")]
    pub memory: Option<MemoryUsage>,
    #[prost(message, optional, tag = "3")]
    pub network: Option<NetworkUsage>,
    #[prost(message, optional, tag = "4")]
    pub process: Option<ProcessUsage>,
    #[prost(message, repeated, tag = "5")]
    pub containers: Vec<ContainerStats>,
}

/// `NetworkUsage`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub default_interface: Option<NetworkInterfaceUsage>,
    #[prost(message, repeated, tag = "3")]
    pub interfaces: Vec<NetworkInterfaceUsage>,
}

/// `NetworkInterfaceUsage`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkInterfaceUsage {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub rx_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "3")]
    pub rx_errors: Option<UInt64Value>,
    #[prost(message, optional, tag = "4")]
    pub tx_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "5")]
    pub tx_errors: Option<UInt64Value>,
}

/// `ProcessUsage`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub process_count: Option<UInt64Value>,
}
