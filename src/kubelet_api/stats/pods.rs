//! Each running pod's and container's CPU time and memory working set. Containers from CRI
//! `ListContainerStats`, named by the kubelet's labels, their start time and state from the
//! node's pods view (terminated instances are dropped, as the kubelet drops them). A pod's own
//! figures come from `ListPodSandboxStats` when the runtime has them; containerd answers them
//! only for a sandbox with a cgroup parent, which nodepulse does not set, so they are the sum
//! of its containers' (the kubelet's fallback when it has no pod cgroup stats).

use std::collections::BTreeMap;

use jiff::Timestamp;
use nodepulse_actors::{
    pods::{
        PodsSnapshot,
        cri::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL},
    },
    ports::{
        ContainerState, ContainerStatsFilter, ContainerUsage, CpuUsage, MemoryUsage, RuntimeStats,
        SandboxStatsFilter, SandboxUsage,
    },
};

use super::{ContainerFigures, CpuAndMemory, PodFigures, Sample, StatsError};

fn time(nanos: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn cpu(usage: Option<&CpuUsage>) -> Option<Sample> {
    let usage = usage?;
    Some(Sample {
        time: time(usage.timestamp),
        value: usage.usage_core_nano_seconds?,
    })
}

fn memory(usage: Option<&MemoryUsage>) -> Option<Sample> {
    let usage = usage?;
    Some(Sample {
        time: time(usage.timestamp),
        value: usage.working_set_bytes?,
    })
}

/// The sum of `samples`, taken at the latest of their times; `None` when there are none.
fn sum(samples: impl Iterator<Item = Option<Sample>>) -> Option<Sample> {
    samples.flatten().reduce(|total, sample| Sample {
        time: total.time.max(sample.time),
        value: total.value.saturating_add(sample.value),
    })
}

pub async fn cpu_and_memory(
    runtime: &impl RuntimeStats,
    snapshot: &PodsSnapshot,
) -> Result<Vec<PodFigures>, StatsError> {
    let (containers, sandboxes) = futures::join!(
        runtime.list_container_stats(ContainerStatsFilter::default()),
        runtime.list_pod_sandbox_stats(SandboxStatsFilter::default()),
    );
    // Sandbox figures are a refinement: without them the containers' sums stand in.
    let sandboxes = sandboxes.unwrap_or_else(|error| {
        tracing::debug!(%error, "no pod sandbox stats; summing the containers'");
        Vec::new()
    });
    Ok(assemble(containers?, &sandboxes, snapshot))
}

/// Groups the containers' figures by pod (its UID label); pure, for the tests.
pub fn assemble(
    containers: Vec<ContainerUsage>,
    sandboxes: &[SandboxUsage],
    snapshot: &PodsSnapshot,
) -> Vec<PodFigures> {
    let label = |usage: &ContainerUsage, name: &str| usage.labels.get(name).cloned();
    let mut pods: BTreeMap<String, PodFigures> = BTreeMap::new();
    for usage in containers {
        let (Some(uid), Some(name), Some(namespace)) = (
            label(&usage, POD_UID_LABEL),
            label(&usage, POD_NAME_LABEL),
            label(&usage, POD_NAMESPACE_LABEL),
        ) else {
            continue;
        };
        let record = snapshot
            .by_uid(&uid)
            .and_then(|pod| pod.containers.iter().find(|c| c.id == usage.id));
        if record.is_some_and(|record| record.state != ContainerState::Running) {
            continue;
        }
        let container = ContainerFigures {
            name: label(&usage, CONTAINER_NAME_LABEL).unwrap_or_else(|| usage.name.clone()),
            start_time: record.and_then(|record| record.created_at),
            usage: CpuAndMemory {
                cpu: cpu(usage.cpu.as_ref()),
                memory: memory(usage.memory.as_ref()),
            },
        };
        pods.entry(uid.clone())
            .or_insert_with(|| PodFigures {
                name,
                namespace,
                uid,
                containers: Vec::new(),
                usage: CpuAndMemory::default(),
            })
            .containers
            .push(container);
    }
    for pod in pods.values_mut() {
        pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
        let sandbox = sandboxes
            .iter()
            .find(|sandbox| sandbox.metadata.uid == pod.uid);
        let summed = |pick: fn(&CpuAndMemory) -> Option<Sample>| {
            sum(pod
                .containers
                .iter()
                .map(|container| pick(&container.usage)))
        };
        pod.usage = CpuAndMemory {
            cpu: sandbox
                .and_then(|sandbox| cpu(sandbox.cpu.as_ref()))
                .or_else(|| summed(|usage| usage.cpu)),
            memory: sandbox
                .and_then(|sandbox| memory(sandbox.memory.as_ref()))
                .or_else(|| summed(|usage| usage.memory)),
        };
    }
    pods.into_values().collect()
}
