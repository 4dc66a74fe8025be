//! Each running pod's and container's CPU, memory and pressure, from the shared cgroup
//! collection (`collection`), as the kubelet's cAdvisor stats provider gives them: a container
//! as its cgroup reports it (the view's running containers the collection read); pods are the
//! view's pods with a ready sandbox or a running container; a pod's own figures are its pod
//! cgroup's where it has one, else the sum of its sandbox's and containers' (the kubelet's
//! fallback without pod cgroup stats); its network is its sandbox's namespace's, its process
//! count its cgroups' processes. Pressure (PSI) is each cgroup's own: no sum stands in for it.

use jiff::Timestamp;
use nodepulse_actors::pods::PodsSnapshot;

use super::{
    collection::{CgroupRecord, Collection, Kind},
    pressure,
    summary::{
        ContainerStats, CpuStats, InterfaceStats, MemoryStats, NetworkStats, PodReference,
        PodStats, ProcessStats,
    },
};

/// The interface the kubelet puts inline in a network figure.
const DEFAULT_INTERFACE: &str = "eth0";

/// A cgroup's CPU figure at the collection's time.
pub fn cpu(record: &CgroupRecord, time: Timestamp) -> Option<CpuStats> {
    let total = record.figures.cpu_nanos?;
    Some(CpuStats {
        time,
        usage_nano_cores: record.nano_cores,
        usage_core_nano_seconds: Some(total),
        psi: record.figures.pressure.cpu.as_ref().map(pressure::psi),
    })
}

/// A cgroup's memory figure: what is left under its limit, where it has one.
pub fn memory(record: &CgroupRecord, time: Timestamp) -> Option<MemoryStats> {
    let memory = record.figures.memory?;
    Some(MemoryStats {
        time,
        available_bytes: (memory.limit_bytes)
            .map(|limit| limit.saturating_sub(memory.working_set_bytes)),
        usage_bytes: Some(memory.usage_bytes),
        working_set_bytes: Some(memory.working_set_bytes),
        rss_bytes: memory.rss_bytes,
        page_faults: memory.page_faults,
        major_page_faults: memory.major_page_faults,
        psi: record.figures.pressure.memory.as_ref().map(pressure::psi),
    })
}

/// The sum of a field over `items`, `None` when none has it.
fn total<T>(items: &[T], field: impl Fn(&T) -> Option<u64>) -> Option<u64> {
    items
        .iter()
        .filter_map(field)
        .reduce(|total, value| total.saturating_add(value))
}

fn summed_cpu(figures: &[CpuStats]) -> Option<CpuStats> {
    let time = figures.iter().map(|cpu| cpu.time).max()?;
    Some(CpuStats {
        time,
        usage_nano_cores: total(figures, |cpu| cpu.usage_nano_cores),
        usage_core_nano_seconds: total(figures, |cpu| cpu.usage_core_nano_seconds),
        // The pod's pressure is its own cgroup's: no sum of the containers' stands in.
        psi: None,
    })
}

fn summed_memory(figures: &[MemoryStats]) -> Option<MemoryStats> {
    let time = figures.iter().map(|memory| memory.time).max()?;
    Some(MemoryStats {
        time,
        // Each container's is against its own limit: their sum means nothing.
        available_bytes: None,
        usage_bytes: total(figures, |memory| memory.usage_bytes),
        working_set_bytes: total(figures, |memory| memory.working_set_bytes),
        rss_bytes: total(figures, |memory| memory.rss_bytes),
        page_faults: total(figures, |memory| memory.page_faults),
        major_page_faults: total(figures, |memory| memory.major_page_faults),
        psi: None,
    })
}

/// The sandbox's interfaces, `eth0` (when there is one) also inline, as the kubelet writes
/// them.
fn network(sandbox: &CgroupRecord, time: Timestamp) -> Option<NetworkStats> {
    if sandbox.network.is_empty() {
        return None;
    }
    let interfaces: Vec<InterfaceStats> = (sandbox.network.iter())
        .map(|counters| super::node::interface(counters.usage()))
        .collect();
    let default = (interfaces.iter())
        .find(|interface| interface.name == DEFAULT_INTERFACE)
        .cloned()
        .unwrap_or_else(|| super::node::interface(Default::default()));
    Some(NetworkStats {
        time,
        default,
        interfaces,
    })
}

/// The pods' CPU and memory stats, in UID order, containers by name; pure, for the tests.
pub fn assemble(collection: &Collection, snapshot: &PodsSnapshot) -> Vec<PodStats> {
    let time = collection.taken;
    let mut pods = Vec::new();
    for pod in snapshot.pods() {
        let records: Vec<&CgroupRecord> = collection.of_pod(&pod.uid).collect();
        let of_kind = |kind| records.iter().copied().filter(move |r| r.kind == kind);
        let containers: Vec<ContainerStats> = of_kind(Kind::Container)
            .map(|record| ContainerStats {
                name: record.container.clone(),
                start_time: record.started,
                cpu: cpu(record, time),
                memory: memory(record, time),
                io: pressure::io(time, record.figures.pressure.io.as_ref()),
                rootfs: None,
                logs: None,
            })
            .collect();
        let sandbox_ready = pod.sandboxes.first().is_some_and(|sandbox| sandbox.ready);
        if !sandbox_ready && containers.is_empty() {
            continue;
        }
        let sandbox = of_kind(Kind::Sandbox).next();
        let own = of_kind(Kind::Pod).next();
        let counted: Vec<&CgroupRecord> = match own {
            Some(own) => vec![own],
            None => of_kind(Kind::Sandbox)
                .chain(of_kind(Kind::Container))
                .collect(),
        };
        let processes: Vec<&CgroupRecord> = of_kind(Kind::Sandbox)
            .chain(of_kind(Kind::Container))
            .collect();
        let cpus: Vec<CpuStats> = counted.iter().filter_map(|r| cpu(r, time)).collect();
        let memories: Vec<MemoryStats> = counted.iter().filter_map(|r| memory(r, time)).collect();
        let (pod_cpu, pod_memory) = match own {
            Some(own) => (cpu(own, time), memory(own, time)),
            None => (summed_cpu(&cpus), summed_memory(&memories)),
        };
        let start_time = (pod.sandboxes.first().and_then(|sandbox| sandbox.created_at))
            .or_else(|| containers.iter().map(|c| c.start_time).min())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        pods.push(PodStats {
            pod_ref: PodReference {
                name: pod.name.clone(),
                namespace: pod.namespace.clone(),
                uid: pod.uid.clone(),
            },
            start_time,
            cpu: pod_cpu,
            memory: pod_memory,
            io: own.and_then(|own| pressure::io(time, own.figures.pressure.io.as_ref())),
            network: sandbox.and_then(|sandbox| network(sandbox, time)),
            // A pod cgroup holds no process of its own: the processes are its sandbox's and
            // containers', as the kubelet sums them.
            process_stats: total(&processes, |r| r.figures.tasks.processes).map(|count| {
                ProcessStats {
                    process_count: Some(count),
                }
            }),
            containers,
            volume_stats: Vec::new(),
            ephemeral_storage: None,
        });
    }
    pods.sort_by(|a, b| a.pod_ref.uid.cmp(&b.pod_ref.uid));
    pods
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod tests;
