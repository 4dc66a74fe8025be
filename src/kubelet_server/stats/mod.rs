//! The node's and its pods' resource figures as the kubelet API serves them, collected into
//! the kubelet's Summary types (`summary`) and rendered as `/stats/summary` (`handler`) or
//! `/metrics/resource` (`resource_metrics`). The node's figures come from the host (`node`, its
//! pressure through `pressure`), its system containers from their cgroups
//! (`system_containers`), the pods' and containers' CPU, memory and pressure from the shared
//! cgroup collection (`collection`, which `/metrics/cadvisor` reads too) and the node's pods
//! view (`pods`), their storage from the runtime's writable layers, the log directories and
//! the volume manager's view (`storage`; full summary only, as the kubelet's
//! `only_cpu_and_memory` leaves it out).

pub mod collection;
pub mod eviction_storage;
pub mod handler;
mod node;
mod pods;
mod pressure;
pub mod resource_metrics;
mod storage;
pub mod summary;
mod system_containers;
pub mod volume_stats;

use jiff::Timestamp;
use nodepulse_actors::ports::{
    ContainerRuntimeError, ContainerStatsFilter, HostError, RuntimeService, RuntimeStats,
};

pub use collection::ContainerCollector;
pub use node::CpuRate;
use summary::{NodeStats, Summary};
pub use system_containers::SystemContainers;
pub use volume_stats::VolumeStatsCache;

/// How much one scrape reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The kubelet's `GetCPUAndMemoryStats`: what `?only_cpu_and_memory=true` and
    /// `/metrics/resource` serve.
    CpuAndMemory,
    Full,
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

/// Reads the node's and its running pods' figures.
pub async fn collect(state: &super::ApiState, scope: Scope) -> Result<Summary, StatsError> {
    let snapshot = state.pods.snapshot();
    let (collection, layers, image_fs) = match &state.runtime {
        Some(runtime) => {
            // The writable layers and the image filesystem are the runtime's figures, and the
            // full summary's alone.
            let full = async {
                if scope == Scope::CpuAndMemory {
                    return Ok((Vec::new(), None));
                }
                let (layers, image_fs) = futures::join!(
                    runtime.list_container_stats(ContainerStatsFilter::default()),
                    runtime.image_fs_info(),
                );
                let image_fs = (image_fs)
                    .inspect_err(|error| tracing::debug!(%error, "no image filesystem stats"))
                    .ok()
                    .and_then(|filesystems| filesystems.into_iter().next());
                Ok::<_, StatsError>((layers?, image_fs))
            };
            let (collection, full) =
                futures::join!(state.containers.collect(Some(runtime), &snapshot), full);
            let (layers, image_fs) = full?;
            (Some(collection?), layers, image_fs)
        }
        None => (None, Vec::new(), None),
    };
    let (node, system) = futures::join!(
        node::node_stats(state, scope, image_fs),
        system_containers::collect(&state.system, &state.host, scope),
    );
    let node = NodeStats {
        system_containers: system?,
        ..node?
    };
    let Some(collection) = collection else {
        return Ok(Summary {
            node,
            pods: Vec::new(),
        });
    };
    let mut pods = pods::assemble(&collection, &snapshot);
    match scope {
        Scope::CpuAndMemory => {
            // The kubelet's `GetCPUAndMemoryStats` has no `io`, network or processes.
            for pod in &mut pods {
                pod.network = None;
                pod.process_stats = None;
                pod.io = None;
                for container in &mut pod.containers {
                    container.io = None;
                }
            }
        }
        Scope::Full => {
            let files = storage::files(&pods, &layers, &snapshot, state.volumes.as_ref());
            let (host, nodefs) = (state.host.clone(), node.fs.clone());
            pods = tokio::task::spawn_blocking(move || {
                storage::measure(&mut pods, &files, &host, nodefs.as_ref(), Timestamp::now());
                pods
            })
            .await
            .map_err(|error| StatsError::Task(error.to_string()))?;
        }
    }
    Ok(Summary { node, pods })
}
