//! The node's own CPU time and memory working set, read from the host by the readers the
//! eviction signals use (`crate::host`), off the async threads.

use jiff::Timestamp;

use super::{CpuAndMemory, Sample, StatsError};
use crate::host::HostProbe;

pub async fn cpu_and_memory(host: &HostProbe) -> Result<CpuAndMemory, StatsError> {
    let probe = host.clone();
    let (cpu, memory) = tokio::task::spawn_blocking(move || probe.cpu_and_memory_blocking())
        .await
        .map_err(|error| StatsError::Task(error.to_string()))?;
    let time = Timestamp::now();
    Ok(CpuAndMemory {
        cpu: Some(Sample { time, value: cpu? }),
        memory: Some(Sample {
            time,
            value: memory?.working_set_bytes,
        }),
    })
}
