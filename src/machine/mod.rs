//! [`MachineFacts`] from the real host: `/proc`, `/etc` and `statvfs`, under a root path so
//! tests can point it at a fixture tree. Facts that cannot be read are left empty and logged
//! once per read; the status setters then say what is missing.

mod network;

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use nodepulse_actors::ports::{MachineFacts, MachineInfo};

/// Reads the machine under `root` (normally `/`); `root_dir` is the kubelet-style root dir
/// whose filesystem gives ephemeral-storage capacity.
pub struct ProcMachine {
    root: PathBuf,
    root_dir: PathBuf,
}

impl ProcMachine {
    pub fn new(root: impl Into<PathBuf>, root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            root_dir: root_dir.into(),
        }
    }

    fn read_file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path.trim_start_matches('/'))).ok()
    }

    fn first_line(&self, path: &str) -> String {
        self.read_file(path)
            .map(|text| text.trim().to_owned())
            .unwrap_or_default()
    }
}

/// `MemTotal` in bytes from a meminfo listing.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `PRETTY_NAME` from an os-release file.
fn pretty_name(os_release: &str) -> Option<String> {
    let value = os_release
        .lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))?;
    Some(value.trim().trim_matches('"').to_owned())
}

/// Capacity in bytes of the filesystem holding `path`, or its nearest existing ancestor.
fn filesystem_capacity(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|candidate| candidate.exists())?;
    let stats = rustix::fs::statvfs(existing).ok()?;
    Some(stats.f_blocks.saturating_mul(stats.f_frsize))
}

impl MachineFacts for ProcMachine {
    fn read(&self) -> MachineInfo {
        let local_v4 =
            network::local_ipv4(&self.read_file("/proc/net/fib_trie").unwrap_or_default());
        let default_route_address = network::default_route_address(
            &self.read_file("/proc/net/route").unwrap_or_default(),
            &local_v4,
        );
        let mut local_addresses: Vec<IpAddr> = local_v4.into_iter().map(IpAddr::V4).collect();
        local_addresses.extend(
            network::local_ipv6(&self.read_file("/proc/net/if_inet6").unwrap_or_default())
                .into_iter()
                .map(IpAddr::V6),
        );
        let machine_id = match self.first_line("/etc/machine-id") {
            id if id.is_empty() => self.first_line("/var/lib/dbus/machine-id"),
            id => id,
        };
        MachineInfo {
            hostname: self.first_line("/proc/sys/kernel/hostname").to_lowercase(),
            cpu_cores: std::thread::available_parallelism()
                .map_or(0, |cores| u32::try_from(cores.get()).unwrap_or(u32::MAX)),
            memory_bytes: self
                .read_file("/proc/meminfo")
                .as_deref()
                .and_then(mem_total)
                .unwrap_or(0),
            machine_id,
            system_uuid: self.first_line("/sys/class/dmi/id/product_uuid"),
            boot_id: self.first_line("/proc/sys/kernel/random/boot_id"),
            kernel_version: self.first_line("/proc/sys/kernel/osrelease"),
            os_image: self
                .read_file("/etc/os-release")
                .as_deref()
                .and_then(pretty_name)
                .unwrap_or_else(|| "Unknown".to_owned()),
            ephemeral_storage_bytes: filesystem_capacity(&self.root_dir),
            local_addresses,
            default_route_address,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo_and_os_release() {
        assert_eq!(
            mem_total("MemTotal:       16393248 kB\nMemFree: 1 kB\n"),
            Some(16_393_248 * 1024)
        );
        assert_eq!(
            pretty_name("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n").as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(pretty_name("NAME=x\n"), None);
    }

    #[test]
    fn a_missing_root_dir_is_measured_on_its_nearest_existing_ancestor() {
        let directory = tempfile::tempdir().expect("temp dir");
        let missing = directory.path().join("var/lib/kubelet");
        assert_eq!(
            filesystem_capacity(&missing),
            filesystem_capacity(directory.path())
        );
        assert!(filesystem_capacity(&missing).is_some_and(|bytes| bytes > 0));
    }

    #[test]
    fn the_real_host_reads_as_it_is() {
        let machine = ProcMachine::new("/", "/").read();
        let nproc = std::thread::available_parallelism()
            .map(|cores| cores.get())
            .unwrap_or(0);
        assert_eq!(machine.cpu_cores as usize, nproc);
        let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
        assert_eq!(Some(machine.memory_bytes), mem_total(&meminfo));
        assert!(!machine.boot_id.is_empty() && !machine.kernel_version.is_empty());
        assert!(
            machine.local_addresses.iter().any(IpAddr::is_loopback),
            "{:?}",
            machine.local_addresses
        );
    }
}
