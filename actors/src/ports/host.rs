//! The host's resource figures, as EvictionSignalActor reads them: memory from the root cgroup
//! (v1 or v2) or `/proc/meminfo`, filesystems from `statvfs`, PIDs from `/proc`. The daemon's
//! adapter reads a root path (`/` on a real host, a fixture tree in tests); reads never block
//! the actor, which runs them as futures.

use std::path::PathBuf;

use futures::future::BoxFuture;

/// Where the memory figures came from, for the debug view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MemorySource {
    CgroupV1,
    CgroupV2,
    Meminfo,
}

/// Node memory: capacity and the root cgroup's working set (usage − inactive file pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    pub capacity_bytes: u64,
    pub working_set_bytes: u64,
    pub source: MemorySource,
}

impl MemoryStats {
    /// `memory.available` = capacity − working set, floored at zero.
    pub fn available_bytes(&self) -> u64 {
        self.capacity_bytes.saturating_sub(self.working_set_bytes)
    }
}

/// One filesystem as `statvfs` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsStats {
    /// The path actually measured (the nearest existing ancestor of the one asked for).
    pub measured: PathBuf,
    /// The device holding it, to tell a dedicated image filesystem from the node's.
    pub device: u64,
    /// Free to unprivileged users (`f_bavail`).
    pub available_bytes: u64,
    /// Free, counting the blocks reserved for root (`f_bfree`): capacity − free is what the
    /// kubelet reports as used.
    pub free_bytes: u64,
    pub capacity_bytes: u64,
    pub inodes_free: u64,
    /// Zero on filesystems without an inode table (btrfs, some overlays): no inode signal then.
    pub inodes: u64,
}

/// Tasks: max = min(`pid_max`, `threads-max`), running = the total in `/proc/loadavg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidStats {
    pub max_tasks: u64,
    pub running_tasks: u64,
}

/// Why one figure could not be read. A missing figure leaves its signals unobserved for that
/// pass (their thresholds cannot be met); the next pass reads again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("unexpected content in {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("statvfs of {path} failed: {message}")]
    Statvfs { path: PathBuf, message: String },
}

/// Everything one housekeeping pass measures; each figure may fail on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostObservation {
    pub memory: Result<MemoryStats, HostError>,
    /// The pods cgroup (`kubepods`), when it exists with a finite memory limit.
    pub allocatable_memory: Option<MemoryStats>,
    pub nodefs: Result<FsStats, HostError>,
    /// The runtime's image filesystem, when a mountpoint was given.
    pub imagefs: Option<Result<FsStats, HostError>>,
    pub pids: Result<PidStats, HostError>,
}

/// Reads the host's figures. `image_fs` is the runtime's image mountpoint (from CRI
/// `ImageFsInfo`), measured too when given.
pub trait HostSignals: Send + Sync + 'static {
    fn observe(&self, image_fs: Option<PathBuf>) -> BoxFuture<'static, HostObservation>;
}
