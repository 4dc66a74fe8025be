//! The host adapter: [`HostSignals`] over a root path — `hostRoot` (`/` on a real host, or
//! where a container mounts the host's `/`), a fixture tree in tests (cgroup v1, v2, odd
//! `/proc` files). Memory from the root cgroup or `/proc/meminfo`, CPU time from the root
//! cgroup or `/proc/stat`, filesystems from `statvfs`, PIDs from `/proc`. Reads run on tokio's
//! blocking pool, so a slow filesystem never stalls an actor.

pub mod cgroup;
pub mod cpu;
pub mod disk_usage;
pub mod memory;
pub mod network;
pub mod pids;
pub mod pressure;

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::ports::{
    FsStats, HostError, HostObservation, HostSignals, InterfaceUsage, PidStats,
};

use crate::config::Config;

/// Reads the host's figures under `root`.
#[derive(Debug, Clone)]
pub struct HostProbe {
    inner: Arc<Paths>,
}

#[derive(Debug)]
struct Paths {
    root: PathBuf,
    /// `rootDir` (the kubelet's root directory), as seen from `root`.
    root_dir: PathBuf,
    /// The pods' cgroup (`<cgroupRoot>/kubepods`) when nodepulse makes one; else the
    /// kubelet's usual names are looked for.
    pods_cgroup: Option<String>,
}

impl HostProbe {
    /// `root_dir` is the configured `rootDir` (`/var/lib/kubelet`); it is looked up under
    /// `root`, like every other path.
    pub fn new(root: impl Into<PathBuf>, root_dir: &Path) -> Self {
        let root = root.into();
        let root_dir = under(&root, root_dir);
        Self {
            inner: Arc::new(Paths {
                root,
                root_dir,
                pods_cgroup: None,
            }),
        }
    }

    /// The real host: `/`.
    pub fn host(root_dir: &Path) -> Self {
        Self::new("/", root_dir)
    }

    /// The host `config` names: `rootDir` under `hostRoot`.
    pub fn configured(config: &Config) -> Self {
        let mut probe = Self::new(&config.host_root, &config.root_dir);
        if config.cgroups_per_qos {
            let layout = nodepulse_actors::pods::cgroups::CgroupLayout::new(
                config.effective_cgroup_root(),
                config.cgroup_driver,
            );
            if let Some(paths) = Arc::get_mut(&mut probe.inner) {
                paths.pods_cgroup = Some(layout.literal(&layout.kubepods()));
            }
        }
        probe
    }

    /// The node's cumulative CPU time (nanoseconds) and memory, blocking: what the kubelet
    /// API's stats read, from the same readers as the eviction signals.
    pub fn cpu_and_memory_blocking(
        &self,
    ) -> (
        Result<u64, HostError>,
        Result<memory::MemoryFigures, HostError>,
    ) {
        let root = &self.inner.root;
        (cpu::node_cpu_nanos(root), memory::node_memory_figures(root))
    }

    /// Everything the kubelet API's full summary reads of the node, blocking; `image_fs` is
    /// the runtime's image mountpoint (from CRI `ImageFsInfo`).
    pub fn node_readings_blocking(&self, image_fs: Option<&Path>) -> NodeReadings {
        let root = &self.inner.root;
        let (cpu, memory) = self.cpu_and_memory_blocking();
        NodeReadings {
            cpu,
            memory,
            interfaces: network::node_interfaces(root),
            nodefs: filesystem(&self.inner.root_dir),
            imagefs: image_fs.map(|mountpoint| filesystem(&under(root, mountpoint))),
            pids: pids::node_pids(root),
            boot_time: cpu::boot_time(root),
        }
    }

    /// The node's CPU, memory and I/O pressure, blocking (each `None` where the kernel has
    /// no PSI file).
    pub fn node_pressures_blocking(&self) -> pressure::Pressures {
        pressure::node_pressures(&self.inner.root)
    }

    /// The cgroup `name`'s figures (a system container of the summary), blocking.
    pub fn cgroup_blocking(&self, name: &str) -> Result<cgroup::CgroupFigures, HostError> {
        cgroup::cgroup_figures(&self.inner.root, name)
    }

    /// This process's own cgroup, as the host's hierarchy names it, blocking.
    pub fn own_cgroup_blocking(&self) -> Result<String, HostError> {
        cgroup::own_cgroup(&self.inner.root)
    }

    /// The cgroup process `pid` (as the host numbers it) is in, blocking.
    pub fn pid_cgroup_blocking(&self, pid: u32) -> Result<String, HostError> {
        cgroup::pid_cgroup(&self.inner.root, pid)
    }

    /// The interfaces of process `pid`'s network namespace, every counter, blocking.
    pub fn process_network_blocking(
        &self,
        pid: u32,
    ) -> Result<Vec<network::InterfaceCounters>, HostError> {
        network::process_counters(&self.inner.root, pid)
    }

    /// The node's interfaces, every counter, blocking.
    pub fn node_network_blocking(&self) -> Result<Vec<network::InterfaceCounters>, HostError> {
        network::node_counters(&self.inner.root)
    }

    /// Names of block devices by number, as `/dev/<name>` (cached by the caller).
    pub fn device_names(&self) -> cgroup::DeviceNames {
        cgroup::DeviceNames::new(&self.inner.root)
    }

    /// When the node booted (seconds since the epoch), blocking.
    pub fn boot_time_blocking(&self) -> Result<i64, HostError> {
        cpu::boot_time(&self.inner.root)
    }

    /// The host's root (`/`, or `hostRoot`).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// `path` (as the host names it, e.g. a log path the runtime reported) under the root.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        under(&self.inner.root, path)
    }

    /// Everything at once, blocking: what [`HostSignals::observe`] runs off the async threads.
    pub fn observe_blocking(&self, image_fs: Option<&Path>) -> HostObservation {
        let root = &self.inner.root;
        HostObservation {
            memory: memory::node_memory(root),
            allocatable_memory: memory::pods_memory(root, self.inner.pods_cgroup.as_deref()),
            nodefs: filesystem(&self.inner.root_dir),
            imagefs: image_fs.map(|mountpoint| filesystem(&under(root, mountpoint))),
            pids: pids::node_pids(root),
        }
    }
}

impl HostSignals for HostProbe {
    fn observe(&self, image_fs: Option<PathBuf>) -> BoxFuture<'static, HostObservation> {
        let probe = self.clone();
        async move {
            let reading =
                tokio::task::spawn_blocking(move || probe.observe_blocking(image_fs.as_deref()));
            reading.await.unwrap_or_else(|error| {
                let failed = |what: &str| HostError::Read {
                    path: PathBuf::from(what),
                    message: format!("the reading task failed: {error}"),
                };
                HostObservation {
                    memory: Err(failed("memory")),
                    allocatable_memory: None,
                    nodefs: Err(failed("nodefs")),
                    imagefs: None,
                    pids: Err(failed("pids")),
                }
            })
        }
        .boxed()
    }
}

/// What [`HostProbe::node_readings_blocking`] read; each figure may fail on its own.
#[derive(Debug, Clone)]
pub struct NodeReadings {
    pub cpu: Result<u64, HostError>,
    pub memory: Result<memory::MemoryFigures, HostError>,
    pub interfaces: Result<Vec<InterfaceUsage>, HostError>,
    pub nodefs: Result<FsStats, HostError>,
    pub imagefs: Option<Result<FsStats, HostError>>,
    pub pids: Result<PidStats, HostError>,
    /// Seconds since the epoch.
    pub boot_time: Result<i64, HostError>,
}

/// `path` as seen from `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// `statvfs` of `path`, or of its nearest existing ancestor when it does not exist (a fresh
/// node has no `/var/lib/kubelet` yet, but its filesystem is the one that will hold it).
pub fn filesystem(path: &Path) -> Result<FsStats, HostError> {
    let measured = path
        .ancestors()
        .find(|candidate| candidate.exists())
        .unwrap_or(Path::new("/"))
        .to_owned();
    let failed = |message: String| HostError::Statvfs {
        path: measured.clone(),
        message,
    };
    let stats = rustix::fs::statvfs(&measured).map_err(|error| failed(error.to_string()))?;
    let device = std::fs::metadata(&measured)
        .map_err(|error| failed(error.to_string()))?
        .dev();
    // f_frsize is the unit of the block counts (f_bsize is only the preferred I/O size).
    let block = if stats.f_frsize > 0 {
        stats.f_frsize
    } else {
        stats.f_bsize
    };
    Ok(FsStats {
        measured,
        device,
        available_bytes: stats.f_bavail.saturating_mul(block),
        free_bytes: stats.f_bfree.saturating_mul(block),
        capacity_bytes: stats.f_blocks.saturating_mul(block),
        inodes_free: stats.f_ffree,
        inodes: stats.f_files,
    })
}

/// Reads a whole (small) file, naming it on failure.
pub(crate) fn read(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|error| HostError::Read {
        path: path.to_owned(),
        message: error.to_string(),
    })
}
