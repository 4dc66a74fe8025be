//! The node's and its pods' resource figures as the kubelet API serves them: what the kubelet's
//! `GetCPUAndMemoryStats` (the `only_cpu_and_memory` summary) holds — the node's CPU time and
//! memory working set from the host, each running container's from CRI `ListContainerStats`,
//! each pod's from its sandbox or summed from its containers. `resource_metrics` renders them as
//! `/metrics/resource`.

mod node;
mod pods;
pub mod resource_metrics;

use jiff::Timestamp;
use nodepulse_actors::ports::{ContainerRuntimeError, HostError};

/// One figure and when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub time: Timestamp,
    pub value: u64,
}

/// CPU time (cumulative, nanoseconds over all cores) and memory working set (bytes), each
/// `None` when its source left it out (the kubelet then skips the family for the object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuAndMemory {
    pub cpu: Option<Sample>,
    pub memory: Option<Sample>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFigures {
    pub name: String,
    /// The container's creation, as the kubelet's `startTime` is; `None` when the node's pods
    /// view does not know the container.
    pub start_time: Option<Timestamp>,
    pub usage: CpuAndMemory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFigures {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub containers: Vec<ContainerFigures>,
    pub usage: CpuAndMemory,
}

/// Everything one scrape read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFigures {
    pub node: CpuAndMemory,
    pub pods: Vec<PodFigures>,
}

/// Why a scrape has no figures (the kubelet's summary fails as a whole then).
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("failed to get node stats: {0}")]
    Host(#[from] HostError),
    #[error("failed to list container stats: {0}")]
    Runtime(#[from] ContainerRuntimeError),
    #[error("the host reading task failed: {0}")]
    Task(String),
}

/// Reads the node's and its running pods' CPU and memory figures.
pub async fn cpu_and_memory(state: &super::ApiState) -> Result<NodeFigures, StatsError> {
    let node = node::cpu_and_memory(&state.host).await?;
    let pods = match &state.runtime {
        Some(runtime) => pods::cpu_and_memory(runtime, &state.pods.snapshot()).await?,
        None => Vec::new(),
    };
    Ok(NodeFigures { node, pods })
}
