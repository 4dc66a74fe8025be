//! The port through which the CRI engine (and pod-level resize) makes, updates and removes the
//! node's cgroups: `kubepods`, the QoS cgroups and one cgroup a pod. Names and values are
//! computed by the pure rules in `pods::cgroups`; an implementation only writes the files of
//! its cgroup version (the daemon's `host::cgroup`) or records the calls (the fake).

use std::{collections::BTreeMap, path::PathBuf};

use super::cgroup_name::{CgroupDriver, CgroupName};

/// What a cgroup is given (the kubelet's `ResourceConfig`); `None` leaves a setting as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// CPU shares (v1 `cpu.shares`; v2 `cpu.weight` from them).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs; -1: unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in µs.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes.
    pub memory: Option<i64>,
    /// `pids.max`.
    pub pids_limit: Option<i64>,
    /// Hugepage limits in bytes by page size in bytes.
    pub hugepage_limits: BTreeMap<u64, i64>,
}

/// Why a cgroup could not be made, changed or removed. Retrying helps only when the cause
/// was passing (a process still exiting, memory above a new limit for now).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodCgroupsError {
    #[error("failed to create cgroup {path}: {message}")]
    Create { path: PathBuf, message: String },
    #[error("failed to write {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("failed to remove cgroup {path}: {message}")]
    Remove { path: PathBuf, message: String },
    #[error("failed to read {path}: {message}")]
    Read { path: PathBuf, message: String },
    /// The kubelet's refusal of a reserved cgroup that does not exist.
    #[error("cgroup {0:?} does not exist")]
    Missing(String),
    /// The host cannot have cgroups made this way (a driver or version not supported).
    #[error("{0}")]
    Unsupported(String),
}

/// The node's cgroups, by name. Calls are quick file writes, made from the engine's tasks.
pub trait PodCgroups: Send + Sync + 'static {
    /// How names become paths on this node.
    fn driver(&self) -> CgroupDriver;
    /// Whether the cgroup exists (in every hierarchy it is made in).
    fn exists(&self, name: &CgroupName) -> bool;
    /// Makes the cgroup (and its parents) if it is missing and applies `config`.
    fn ensure(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError>;
    /// Applies `config` to an existing cgroup; an error when it does not exist.
    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError>;
    /// Kills the processes left in the cgroup and removes it with its children; nothing to do
    /// when it does not exist.
    fn destroy(&self, name: &CgroupName) -> Result<(), PodCgroupsError>;
    /// The literal names (as the driver writes them) of the cgroup's child cgroups.
    fn children(&self, name: &CgroupName) -> Result<Vec<String>, PodCgroupsError>;
}
