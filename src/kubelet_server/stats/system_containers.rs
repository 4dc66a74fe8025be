//! The node's `systemContainers`: the cgroups the kubelet's summary reports by role, each as
//! cAdvisor gives a raw cgroup (CPU, memory, their pressure, and `io` in the full summary; no
//! filesystems). `kubelet` is `kubeletCgroups` or, unset, the cgroup nodepulse runs in (the
//! kubelet's `getContainer` of its own PID), with nodepulse's start as its start time;
//! `runtime` is `runtimeCgroups` and `misc` `systemCgroups`, left out when unset as the kubelet
//! skips an empty name; `pods` (the kubelet's `kubepods`, which nodepulse makes with
//! `cgroupsPerQOS`) is not reported yet. A cgroup that cannot
//! be read is left out, as the kubelet leaves out one cAdvisor does not know.

use jiff::Timestamp;

use super::{
    CpuRate, Scope, StatsError, pressure,
    summary::{ContainerStats, CpuStats, MemoryStats},
};
use crate::{
    config::Config,
    host::{HostProbe, cgroup::CgroupFigures},
};

/// The roles in the order they are written (the kubelet's map has none).
const ROLES: [&str; 3] = ["kubelet", "runtime", "misc"];

/// The configured cgroups, nodepulse's start, and each role's previous CPU time for its rate.
#[derive(Debug)]
pub struct SystemContainers {
    kubelet: Option<String>,
    runtime: Option<String>,
    misc: Option<String>,
    started: Timestamp,
    rates: [CpuRate; 3],
}

impl SystemContainers {
    pub fn new(config: &Config, started: Timestamp) -> Self {
        Self {
            kubelet: config.kubelet_cgroups.clone(),
            runtime: config.runtime_cgroups.clone(),
            misc: config.system_cgroups.clone(),
            started,
            rates: Default::default(),
        }
    }
}

/// Each known role's figures, read off the async threads.
pub async fn collect(
    system: &SystemContainers,
    host: &HostProbe,
    scope: Scope,
) -> Result<Vec<ContainerStats>, StatsError> {
    let host = host.clone();
    let configured = [
        system.kubelet.clone(),
        system.runtime.clone(),
        system.misc.clone(),
    ];
    let readings = tokio::task::spawn_blocking(move || {
        let mut configured = configured;
        if configured[0].is_none() {
            configured[0] = host
                .own_cgroup_blocking()
                .inspect_err(|error| tracing::debug!(%error, "no cgroup of nodepulse's own"))
                .ok();
        }
        configured.map(|cgroup| {
            let cgroup = cgroup?;
            host.cgroup_blocking(&cgroup)
                .inspect_err(|error| tracing::debug!(%error, %cgroup, "no system container"))
                .ok()
        })
    })
    .await
    .map_err(|error| StatsError::Task(error.to_string()))?;
    let time = Timestamp::now();
    let mut stats = Vec::new();
    for ((role, figures), rate) in ROLES.iter().zip(readings).zip(&system.rates) {
        let Some(figures) = figures else { continue };
        let start_time = if *role == "kubelet" {
            system.started
        } else {
            figures
                .created
                .and_then(|created| Timestamp::try_from(created).ok())
                .unwrap_or(Timestamp::UNIX_EPOCH)
        };
        stats.push(container(role, start_time, time, &figures, rate, scope));
    }
    Ok(stats)
}

fn container(
    role: &str,
    start_time: Timestamp,
    time: Timestamp,
    figures: &CgroupFigures,
    rate: &CpuRate,
    scope: Scope,
) -> ContainerStats {
    let pressures = &figures.pressure;
    ContainerStats {
        name: role.to_owned(),
        start_time,
        cpu: figures.cpu_nanos.map(|total| CpuStats {
            time,
            usage_nano_cores: rate.nano_cores(time, total),
            usage_core_nano_seconds: Some(total),
            psi: pressures.cpu.as_ref().map(pressure::psi),
        }),
        memory: figures.memory.map(|memory| MemoryStats {
            time,
            available_bytes: memory
                .limit_bytes
                .map(|limit| limit.saturating_sub(memory.working_set_bytes)),
            usage_bytes: Some(memory.usage_bytes),
            working_set_bytes: Some(memory.working_set_bytes),
            rss_bytes: memory.rss_bytes,
            page_faults: memory.page_faults,
            major_page_faults: memory.major_page_faults,
            psi: pressures.memory.as_ref().map(pressure::psi),
        }),
        // The kubelet's CPU-and-memory summary has no `io`.
        io: match scope {
            Scope::CpuAndMemory => None,
            Scope::Full => pressure::io(time, pressures.io.as_ref()),
        },
        rootfs: None,
        logs: None,
    }
}
