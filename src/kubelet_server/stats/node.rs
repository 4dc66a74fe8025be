//! The node's own figures, read from the host by the readers the eviction signals use
//! (`crate::host`), off the async threads: CPU time (and its rate since the previous scrape,
//! the kubelet's `usageNanoCores`), memory, and for the full summary the network interfaces,
//! the kubelet root directory's filesystem, the runtime's image filesystem and the PID limit;
//! the CPU's and memory's pressure in both, the `io` pressure in the full summary only (the
//! kubelet's `GetCPUAndMemoryStats` has no `io`).

use std::{
    path::PathBuf,
    sync::{Mutex, PoisonError},
};

use jiff::Timestamp;
use nodepulse_actors::ports::{HostError, ImageFsUsage};

use super::{
    Scope, StatsError, pressure,
    summary::{
        CpuStats, FsStats, InterfaceStats, MemoryStats, NetworkStats, NodeStats, RlimitStats,
        RuntimeStats,
    },
};
use crate::host::{HostProbe, memory::MemoryFigures, pressure::Pressures};

/// The interface the kubelet puts inline in a network figure.
const DEFAULT_INTERFACE: &str = "eth0";

/// The node's previous CPU time, so a scrape can tell the rate since the one before (cAdvisor
/// keeps the same from its housekeeping). The first scrape has no rate.
#[derive(Debug, Default)]
pub struct CpuRate {
    previous: Mutex<Option<(Timestamp, u64)>>,
}

impl CpuRate {
    /// Nanocores (core-nanoseconds per second) since the previous sample, recording this one.
    pub fn nano_cores(&self, time: Timestamp, total: u64) -> Option<u64> {
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let rate = previous.and_then(|(then, before)| {
            let elapsed = time.duration_since(then).as_nanos();
            let used = total.checked_sub(before)?;
            (elapsed > 0).then(|| (i128::from(used) * 1_000_000_000 / elapsed) as u64)
        });
        *previous = Some((time, total));
        rate
    }
}

/// The node's stats; `image_fs` is what the runtime's ImageFsInfo answered (full scope).
pub async fn node_stats(
    state: &crate::kubelet_server::ApiState,
    scope: Scope,
    image_fs: Option<ImageFsUsage>,
) -> Result<NodeStats, StatsError> {
    let probe = state.host.clone();
    let mountpoint = image_fs.as_ref().map(|fs| fs.mountpoint.clone());
    let readings = tokio::task::spawn_blocking(move || read(&probe, scope, mountpoint))
        .await
        .map_err(|error| StatsError::Task(error.to_string()))?;
    let time = Timestamp::now();
    let cpu = readings.cpu?;
    let memory = readings.memory?;
    let start_time = optional("boot time", readings.boot_time)
        .and_then(|seconds| Timestamp::from_second(seconds).ok())
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let mut node = NodeStats {
        node_name: state.node_name.clone(),
        system_containers: Vec::new(),
        start_time,
        cpu: Some(CpuStats {
            time,
            usage_nano_cores: state.node_cpu.nano_cores(time, cpu),
            usage_core_nano_seconds: Some(cpu),
            psi: readings.pressures.cpu.as_ref().map(pressure::psi),
        }),
        memory: Some(MemoryStats {
            psi: readings.pressures.memory.as_ref().map(pressure::psi),
            ..memory_stats(time, &memory)
        }),
        io: None,
        network: None,
        fs: None,
        runtime: None,
        rlimit: None,
    };
    let Some(full) = readings.full else {
        return Ok(node);
    };
    node.io = pressure::io(time, readings.pressures.io.as_ref());
    node.network = optional("network", full.interfaces).map(|interfaces| network(time, interfaces));
    node.fs = optional("filesystem", full.nodefs).map(|fs| fs_stats(time, &fs));
    node.runtime = image_fs.map(|usage| RuntimeStats {
        image_fs: Some(image_fs_stats(
            time,
            &usage,
            full.imagefs.and_then(|fs| optional("image filesystem", fs)),
        )),
    });
    node.rlimit = optional("PIDs", full.pids).map(|pids| RlimitStats {
        time,
        maxpid: Some(pids.max_tasks),
        curproc: Some(pids.running_tasks),
    });
    Ok(node)
}

/// A figure the summary leaves out when the host does not give it.
fn optional<T>(what: &str, result: Result<T, HostError>) -> Option<T> {
    result
        .inspect_err(|error| tracing::debug!(%error, "no node {what} in the stats summary"))
        .ok()
}

struct Readings {
    cpu: Result<u64, HostError>,
    memory: Result<MemoryFigures, HostError>,
    boot_time: Result<i64, HostError>,
    pressures: Pressures,
    full: Option<crate::host::NodeReadings>,
}

fn read(probe: &HostProbe, scope: Scope, image_fs: Option<PathBuf>) -> Readings {
    match scope {
        Scope::CpuAndMemory => {
            let (cpu, memory) = probe.cpu_and_memory_blocking();
            Readings {
                cpu,
                memory,
                boot_time: probe.boot_time_blocking(),
                pressures: probe.node_pressures_blocking(),
                full: None,
            }
        }
        Scope::Full => {
            let all = probe.node_readings_blocking(image_fs.as_deref());
            Readings {
                cpu: all.cpu.clone(),
                memory: all.memory.clone(),
                boot_time: all.boot_time.clone(),
                pressures: probe.node_pressures_blocking(),
                full: Some(all),
            }
        }
    }
}

fn memory_stats(time: Timestamp, memory: &MemoryFigures) -> MemoryStats {
    MemoryStats {
        time,
        available_bytes: Some(
            memory
                .capacity_bytes
                .saturating_sub(memory.working_set_bytes),
        ),
        usage_bytes: Some(memory.usage_bytes),
        working_set_bytes: Some(memory.working_set_bytes),
        rss_bytes: memory.rss_bytes,
        page_faults: memory.page_faults,
        major_page_faults: memory.major_page_faults,
        psi: None,
    }
}

/// The host's interfaces, `eth0` (when there is one) also inline, as the kubelet writes them.
pub fn network(
    time: Timestamp,
    interfaces: Vec<nodepulse_actors::ports::InterfaceUsage>,
) -> NetworkStats {
    let interfaces: Vec<InterfaceStats> = interfaces.into_iter().map(interface).collect();
    let default = interfaces
        .iter()
        .find(|interface| interface.name == DEFAULT_INTERFACE)
        .cloned()
        .unwrap_or(InterfaceStats {
            name: String::new(),
            rx_bytes: None,
            rx_errors: None,
            tx_bytes: None,
            tx_errors: None,
        });
    NetworkStats {
        time,
        default,
        interfaces,
    }
}

pub fn interface(usage: nodepulse_actors::ports::InterfaceUsage) -> InterfaceStats {
    InterfaceStats {
        name: usage.name,
        rx_bytes: usage.rx_bytes,
        rx_errors: usage.rx_errors,
        tx_bytes: usage.tx_bytes,
        tx_errors: usage.tx_errors,
    }
}

/// A filesystem as statvfs measured it; used = capacity − free, as cAdvisor counts it.
pub fn fs_stats(time: Timestamp, fs: &nodepulse_actors::ports::FsStats) -> FsStats {
    // A filesystem without an inode table reports none; the kubelet then has no inode figures.
    let inodes = (fs.inodes > 0).then_some(fs.inodes);
    FsStats {
        time,
        available_bytes: Some(fs.available_bytes),
        capacity_bytes: Some(fs.capacity_bytes),
        used_bytes: Some(fs.capacity_bytes.saturating_sub(fs.free_bytes)),
        inodes_free: inodes.map(|_| fs.inodes_free),
        inodes,
        inodes_used: inodes.map(|inodes| inodes.saturating_sub(fs.inodes_free)),
    }
}

/// The runtime's image filesystem: its own used bytes and inodes, the capacity and free space
/// of the filesystem its mountpoint is on (the kubelet's `imageFs`).
fn image_fs_stats(
    time: Timestamp,
    usage: &ImageFsUsage,
    fs: Option<nodepulse_actors::ports::FsStats>,
) -> FsStats {
    let measured = fs.as_ref().map(|fs| fs_stats(time, fs));
    FsStats {
        time,
        available_bytes: measured.as_ref().and_then(|fs| fs.available_bytes),
        capacity_bytes: measured.as_ref().and_then(|fs| fs.capacity_bytes),
        used_bytes: usage.used_bytes,
        inodes_free: measured.as_ref().and_then(|fs| fs.inodes_free),
        inodes: measured.as_ref().and_then(|fs| fs.inodes),
        inodes_used: usage.inodes_used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_rate_is_the_time_used_over_the_time_passed_from_the_second_sample_on() {
        let rate = CpuRate::default();
        let start: Timestamp = "2026-12-01T10:00:00Z".parse().expect("time");
        assert_eq!(
            rate.nano_cores(start, 1_000),
            None,
            "nothing to compare with"
        );
        let later = start + jiff::SignedDuration::from_secs(2);
        // One core-second over two seconds: half a core.
        assert_eq!(
            rate.nano_cores(later, 1_000 + 1_000_000_000),
            Some(500_000_000)
        );
        assert_eq!(
            rate.nano_cores(later, 5),
            None,
            "no time passed, and a reset"
        );
    }
}
