//! The machine families of `/metrics/cadvisor`, as cAdvisor's `prometheus_machine.go` writes
//! them from its cached machine info: logical and physical cores, sockets, memory and swap,
//! each labelled with the machine's `boot_id`, `machine_id` and `system_uuid`; read once (the
//! kubelet's `GetCachedMachineInfo`). NUMA topology, DIMMs and NVM are left out.

use std::path::Path;

use nodepulse_actors::ports::MachineFacts;

use crate::{kubelet_server::exposition, machine::ProcMachine};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    boot_id: String,
    machine_id: String,
    system_uuid: String,
    cores: u64,
    physical_cores: u64,
    sockets: u64,
    memory_bytes: u64,
    swap_bytes: u64,
}

/// Physical cores (distinct `physical id` and `core id` pairs) and sockets (distinct
/// `physical id`s) of a `/proc/cpuinfo`; one of each where the file says neither (VMs).
pub fn topology(cpuinfo: &str) -> (u64, u64) {
    let mut cores = std::collections::BTreeSet::new();
    let mut sockets = std::collections::BTreeSet::new();
    let mut socket = None;
    for line in cpuinfo.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "physical id" => {
                socket = Some(value.trim().to_owned());
                sockets.insert(value.trim().to_owned());
            }
            "core id" => {
                cores.insert((socket.clone(), value.trim().to_owned()));
            }
            _ => {}
        }
    }
    ((cores.len() as u64).max(1), (sockets.len() as u64).max(1))
}

/// `SwapTotal` of a `/proc/meminfo`, in bytes.
fn swap_total(meminfo: &str) -> u64 {
    let line = meminfo.lines().find(|line| line.starts_with("SwapTotal:"));
    let kib = line.and_then(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok());
    kib.unwrap_or(0).saturating_mul(1024)
}

impl Machine {
    /// The machine under `root` (blocking: reads `/proc` and `/sys`).
    pub fn read(root: &Path) -> Self {
        let facts = ProcMachine::new(root, root).read();
        let text = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_default();
        let (physical_cores, sockets) = topology(&text("proc/cpuinfo"));
        Self {
            boot_id: facts.boot_id,
            machine_id: facts.machine_id,
            system_uuid: facts.system_uuid,
            cores: u64::from(facts.cpu_cores),
            physical_cores,
            sockets,
            memory_bytes: facts.memory_bytes,
            swap_bytes: swap_total(&text("proc/meminfo")),
        }
    }

    /// The families' text, each `(name, text)` to be sorted with the others.
    pub fn families(&self) -> Vec<(&'static str, String)> {
        let labels = [
            ("boot_id", self.boot_id.as_str()),
            ("machine_id", self.machine_id.as_str()),
            ("system_uuid", self.system_uuid.as_str()),
        ];
        [
            (
                "machine_cpu_cores",
                "Number of logical CPU cores.",
                self.cores,
            ),
            (
                "machine_cpu_physical_cores",
                "Number of physical CPU cores.",
                self.physical_cores,
            ),
            (
                "machine_cpu_sockets",
                "Number of CPU sockets.",
                self.sockets,
            ),
            (
                "machine_memory_bytes",
                "Amount of memory installed on the machine.",
                self.memory_bytes,
            ),
            (
                "machine_swap_bytes",
                "Amount of swap memory available on the machine.",
                self.swap_bytes,
            ),
        ]
        .into_iter()
        .map(|(name, help, value)| {
            let mut samples = String::new();
            exposition::sample(&mut samples, name, &labels, value as f64, None);
            let mut text = String::new();
            exposition::family(&mut text, name, help, "gauge", &samples);
            (name, text)
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_and_sockets_are_counted_from_cpuinfo() {
        let two_sockets = "processor : 0\nphysical id : 0\ncore id : 0\n\n\
                           processor : 1\nphysical id : 0\ncore id : 0\n\n\
                           processor : 2\nphysical id : 1\ncore id : 0\n\n";
        assert_eq!(topology(two_sockets), (2, 2), "core 0 of each socket");
        assert_eq!(
            topology("processor : 0\nprocessor : 1\n"),
            (1, 1),
            "a VM says neither"
        );
        assert_eq!(
            swap_total("MemTotal: 1 kB\nSwapTotal:  2048 kB\n"),
            2 * 1024 * 1024
        );
    }
}
