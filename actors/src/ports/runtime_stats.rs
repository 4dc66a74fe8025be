//! The container runtime's resource figures (CRI ContainerStats, ListContainerStats,
//! PodSandboxStats, ListPodSandboxStats), as the kubelet API's stats summary reads them: typed
//! answers rather than CRI messages, every figure optional as the runtime may leave it out.
//! Timestamps are nanoseconds since the epoch, as the runtime took them.

use futures::future::BoxFuture;

use super::{ContainerRuntimeResult, ImageFsUsage, Labels, SandboxMetadata};

/// CRI `CpuUsage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuUsage {
    pub timestamp: i64,
    /// Cumulative CPU time over all cores since the container (or sandbox) was created.
    pub usage_core_nano_seconds: Option<u64>,
    /// CPU use averaged over the runtime's sample window, in core-nanoseconds per second.
    pub usage_nano_cores: Option<u64>,
}

/// CRI `MemoryUsage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    pub timestamp: i64,
    pub working_set_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// CRI `SwapUsage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwapUsage {
    pub timestamp: i64,
    pub available_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
}

/// One container's figures (CRI `ContainerStats`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerUsage {
    pub id: String,
    pub name: String,
    pub attempt: u32,
    pub labels: Labels,
    pub annotations: Labels,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    /// The container's writable layer (CRI `FilesystemUsage`, the message ImageFsInfo uses).
    pub writable_layer: Option<ImageFsUsage>,
    pub swap: Option<SwapUsage>,
}

/// One network interface's counters (CRI `NetworkInterfaceUsage`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InterfaceUsage {
    pub name: String,
    pub rx_bytes: Option<u64>,
    pub rx_errors: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub tx_errors: Option<u64>,
}

/// CRI `NetworkUsage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkUsage {
    pub timestamp: i64,
    pub default_interface: Option<InterfaceUsage>,
    /// The other interfaces.
    pub interfaces: Vec<InterfaceUsage>,
}

/// One sandbox's figures on Linux (CRI `PodSandboxStats` with its `linux` part).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxUsage {
    pub id: String,
    pub metadata: SandboxMetadata,
    pub labels: Labels,
    pub annotations: Labels,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub network: Option<NetworkUsage>,
    pub process_count: Option<u64>,
    pub containers: Vec<ContainerUsage>,
}

/// Which containers ListContainerStats answers for; the default: every running one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerStatsFilter {
    pub id: Option<String>,
    pub sandbox_id: Option<String>,
    pub labels: Labels,
}

/// Which sandboxes ListPodSandboxStats answers for; the default: every one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxStatsFilter {
    pub id: Option<String>,
    pub labels: Labels,
}

/// The CRI stats calls. Futures are `'static` so a service can run them on its own tasks.
pub trait RuntimeStats: Send + Sync + 'static {
    /// ContainerStats; `NotFound` when the runtime has no such container.
    fn container_stats(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ContainerUsage>>;
    fn list_container_stats(
        &self,
        filter: ContainerStatsFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<ContainerUsage>>>;
    /// PodSandboxStats; `NotFound` when the runtime has no such sandbox.
    fn pod_sandbox_stats(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<SandboxUsage>>;
    fn list_pod_sandbox_stats(
        &self,
        filter: SandboxStatsFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<SandboxUsage>>>;
}
