//! One cgroup's figures, as cAdvisor reads a container's for the kubelet (the summary's
//! `systemContainers`, the containers of `/stats/summary`, `/metrics/resource` and
//! `/metrics/cadvisor`): CPU time (user, system, CFS throttling), memory (usage, working set,
//! cache, RSS, swap, faults, its limit), block I/O by device, tasks, the limits it was given,
//! pressure and its creation time; and the cgroup a process is in, as the kubelet's
//! `getContainer` finds its own. Paths are read under the host root; cgroup v2 (`v2`, one
//! hierarchy) or v1 (`v1`, one hierarchy per controller). Nothing here walks a tree: a
//! cgroup is a fixed set of small files.

mod io;
mod pod_cgroups;
mod settings;
mod v1;
mod v2;

use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use nodepulse_actors::ports::HostError;

pub use io::{DeviceIo, DeviceNames};
pub use pod_cgroups::HostCgroups;
pub use settings::{Setting, cpu_weight, v1_settings, v2_settings};

use super::{memory::MemoryFigures, pressure::Pressures, read};

/// A limit at or above this is "unlimited" (the kubelet's `isMemoryUnlimited` and cAdvisor's
/// `maxMemorySize`: 2^62, not `u64::MAX`, as the kernel rounds what it reports).
const UNLIMITED_MEMORY: u64 = 1 << 62;

/// What one cgroup reports. A figure the kernel does not give (a controller not mounted, a
/// file this kernel lacks) is `None`, or empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupFigures {
    /// The cgroup directories' oldest modification time (cAdvisor's `CreationTime`).
    pub created: Option<SystemTime>,
    pub cpu_nanos: Option<u64>,
    pub cpu: CpuDetail,
    pub memory: Option<CgroupMemory>,
    /// Block I/O by device (major:minor), as the kernel counts it for the cgroup.
    pub io: Vec<DeviceIo>,
    pub tasks: Tasks,
    pub limits: Limits,
    pub pressure: Pressures,
}

/// CPU time by mode, and the CFS quota's enforcement (nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuDetail {
    pub user_nanos: Option<u64>,
    pub system_nanos: Option<u64>,
    pub periods: Option<u64>,
    pub throttled_periods: Option<u64>,
    pub throttled_nanos: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupMemory {
    pub usage_bytes: u64,
    pub working_set_bytes: u64,
    /// The cgroup's limit when it has one.
    pub limit_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    /// The container's own page faults (cgroup v1's plain counters; v2 has one scope).
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    /// The page faults of the cgroup and its children (v1's `total_` counters).
    pub hierarchy_page_faults: Option<u64>,
    pub hierarchy_major_page_faults: Option<u64>,
    pub cache_bytes: Option<u64>,
    pub mapped_file_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub kernel_bytes: Option<u64>,
    pub active_file_bytes: Option<u64>,
    pub inactive_file_bytes: Option<u64>,
    pub max_usage_bytes: Option<u64>,
    /// How often usage hit the limit.
    pub failcnt: Option<u64>,
    /// Processes the kernel's OOM killer killed in the cgroup.
    pub oom_kills: Option<u64>,
}

/// The cgroup's processes and threads, and its thread limit (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tasks {
    pub processes: Option<u64>,
    pub threads: Option<u64>,
    pub threads_max: Option<u64>,
}

/// The limits the cgroup was given, in cAdvisor's spec terms: CPU shares (v2's weight in
/// shares), the CFS period and quota in microseconds (no quota: `None`), memory limit, swap
/// limit and reservation (unlimited: `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub cpu_shares: Option<u64>,
    pub cpu_period: Option<u64>,
    pub cpu_quota: Option<u64>,
    pub memory_limit: Option<u64>,
    pub swap_limit: Option<u64>,
    pub memory_reservation: Option<u64>,
}

/// Whether `root`'s cgroups are one v2 hierarchy.
pub fn unified(root: &Path) -> bool {
    root.join("sys/fs/cgroup/cgroup.controllers").exists()
}

fn dir(base: &Path, name: &str) -> PathBuf {
    base.join(name.trim_start_matches('/'))
}

/// The cgroup a process is in, from its `/proc/<pid>/cgroup` text: the v2 (`0::`) path on a
/// unified host, else the `cpu` one, which must be the `memory` one too (the kubelet accounts
/// both in one cgroup and refuses otherwise).
pub fn process_cgroup(path: &Path, text: &str, unified_host: bool) -> Result<String, HostError> {
    let invalid = |message: String| HostError::Parse {
        path: path.to_owned(),
        message,
    };
    let mut unified_path = None;
    let (mut cpu, mut memory) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(cgroup)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            unified_path = Some(cgroup);
        }
        for controller in controllers.split(',') {
            match controller {
                "cpu" => cpu = Some(cgroup),
                "memory" => memory = Some(cgroup),
                _ => {}
            }
        }
    }
    if unified_host {
        return unified_path
            .map(str::to_owned)
            .ok_or_else(|| invalid("no unified (0::) cgroup".to_owned()));
    }
    match (cpu, memory) {
        (Some(cpu), Some(memory)) if cpu == memory => Ok(cpu.to_owned()),
        (Some(cpu), Some(memory)) => Err(invalid(format!(
            "cpu and memory cgroup hierarchy not unified.  cpu: {cpu}, memory: {memory}"
        ))),
        (None, _) => Err(invalid("no cpu cgroup".to_owned())),
        (_, None) => Err(invalid("no memory cgroup".to_owned())),
    }
}

/// This process's cgroup (what the kubelet's summary names `kubelet` when `kubeletCgroups` is
/// unset), judged by `root`'s hierarchy.
pub fn own_cgroup(root: &Path) -> Result<String, HostError> {
    let path = Path::new("/proc/self/cgroup");
    process_cgroup(path, &read(path)?, unified(root))
}

/// The cgroup of process `pid` as `root`'s hierarchy names it (a container's init process
/// finds its container's cgroup).
pub fn pid_cgroup(root: &Path, pid: u32) -> Result<String, HostError> {
    let path = root.join(format!("proc/{pid}/cgroup"));
    process_cgroup(&path, &read(&path)?, unified(root))
}

/// `name`'s figures; an error when the cgroup does not exist.
pub fn cgroup_figures(root: &Path, name: &str) -> Result<CgroupFigures, HostError> {
    let cgroups = root.join("sys/fs/cgroup");
    if unified(root) {
        v2::figures(root, &dir(&cgroups, name), name == "/")
    } else {
        v1::figures(&cgroups, name)
    }
}

fn exists(dir: &Path) -> Result<(), HostError> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(missing(dir))
    }
}

fn missing(dir: &Path) -> HostError {
    HostError::Read {
        path: dir.to_owned(),
        message: "no such cgroup".to_owned(),
    }
}

fn number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A memory figure that means "no limit" above [`UNLIMITED_MEMORY`] (or as `max`).
fn limited(value: Option<u64>) -> Option<u64> {
    value.filter(|limit| *limit < UNLIMITED_MEMORY)
}

/// A `key value` file (`memory.stat`, `cpu.stat`, `memory.events`) as its pairs.
fn pairs(text: &str) -> impl Fn(&str) -> Option<u64> + '_ {
    move |name| super::memory::stat_field(text, name)
}

/// The lines of `cgroup.procs`: the cgroup's processes.
fn count_lines(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().filter(|line| !line.trim().is_empty()).count() as u64)
}

/// cAdvisor's creation time: the oldest of the directories' and a rarely touched file's
/// modification times (a directory's changes whenever a child cgroup is made).
fn created(dirs: &[PathBuf], steady_file: &str) -> Option<SystemTime> {
    dirs.iter()
        .flat_map(|dir| [dir.clone(), dir.join(steady_file)])
        .filter_map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .min()
}

fn root_memory(figures: MemoryFigures) -> CgroupMemory {
    CgroupMemory {
        usage_bytes: figures.usage_bytes,
        working_set_bytes: figures.working_set_bytes,
        limit_bytes: Some(figures.capacity_bytes),
        rss_bytes: figures.rss_bytes,
        page_faults: figures.page_faults,
        major_page_faults: figures.major_page_faults,
        ..CgroupMemory::default()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const V1: &str = "9:name=systemd:/\n4:memory:/jobs/a\n2:cpuacct:/\n1:cpu:/jobs/a\n0::/\n";

    #[test]
    fn a_process_cgroup_is_the_unified_path_or_the_agreeing_cpu_and_memory_one() {
        let path = Path::new("/proc/self/cgroup");
        assert_eq!(
            process_cgroup(path, "0::/system.slice/nodepulse.service\n", true).expect("v2"),
            "/system.slice/nodepulse.service"
        );
        assert_eq!(process_cgroup(path, V1, false).expect("v1"), "/jobs/a");
        let error = process_cgroup(path, "4:memory:/b\n3:cpu,cpuacct:/a\n", false)
            .expect_err("cpu and memory differ");
        assert!(error.to_string().contains("not unified"), "{error}");
    }

    pub fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_pids_cgroup_is_read_from_its_proc_file_under_the_root() {
        let root = tempfile::tempdir().expect("tempdir");
        write(&root.path().join("proc/42/cgroup"), V1);
        assert_eq!(pid_cgroup(root.path(), 42).expect("read"), "/jobs/a");
        let error = pid_cgroup(root.path(), 43).expect_err("no such process");
        assert!(error.to_string().contains("proc/43/cgroup"), "{error}");
    }
}
