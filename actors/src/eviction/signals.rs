//! The kubelet's eviction signals: their names, which node condition each drives, and the
//! observations a housekeeping pass makes of them.

use std::{collections::BTreeMap, fmt};

/// One eviction signal, by its kubelet name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    AllocatableMemoryAvailable,
    NodefsAvailable,
    NodefsInodesFree,
    ImagefsAvailable,
    ImagefsInodesFree,
    PidAvailable,
}

/// The node condition a met threshold of a signal reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl Signal {
    pub const ALL: [Self; 7] = [
        Self::MemoryAvailable,
        Self::AllocatableMemoryAvailable,
        Self::NodefsAvailable,
        Self::NodefsInodesFree,
        Self::ImagefsAvailable,
        Self::ImagefsInodesFree,
        Self::PidAvailable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::MemoryAvailable => "memory.available",
            Self::AllocatableMemoryAvailable => "allocatableMemory.available",
            Self::NodefsAvailable => "nodefs.available",
            Self::NodefsInodesFree => "nodefs.inodesFree",
            Self::ImagefsAvailable => "imagefs.available",
            Self::ImagefsInodesFree => "imagefs.inodesFree",
            Self::PidAvailable => "pid.available",
        }
    }

    /// The signal named `name`, as written in `evictionHard` and friends.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|signal| signal.name() == name)
    }

    pub fn condition(self) -> Condition {
        match self {
            Self::MemoryAvailable | Self::AllocatableMemoryAvailable => Condition::MemoryPressure,
            Self::NodefsAvailable
            | Self::NodefsInodesFree
            | Self::ImagefsAvailable
            | Self::ImagefsInodesFree => Condition::DiskPressure,
            Self::PidAvailable => Condition::PidPressure,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A signal's value in one pass: what is available and out of what capacity (percentage
/// thresholds are taken of the capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// Everything one pass observed; a signal whose figure could not be read is absent.
pub type Observations = BTreeMap<Signal, Observation>;
