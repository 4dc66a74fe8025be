//! What the supervision of the engine's tasks keeps (in the engine's core, under its lock): the
//! tasks it restarts after a panic, the faults armed to make one panic, and the panics caught.
//! Plain state below the engine; `tasks` holds what acts on it.

use std::collections::BTreeSet;

use serde::Serialize;

/// An engine task that runs for as long as the node needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineTask {
    Pleg,
    EventedPleg,
    GarbageCollection,
    PodCgroups,
}

/// Panics caught per kind of task, for the debug view.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPanics {
    /// Pod workers that panicked; each pod was re-armed.
    pub pod_workers: u64,
    /// PLEG restarts.
    pub pleg: u64,
    /// Restarts of the event stream's follower.
    pub evented_pleg: u64,
    /// Garbage collector restarts.
    pub garbage_collection: u64,
    /// Restarts of the pod cgroups' housekeeping.
    pub pod_cgroups: u64,
    /// Probe-driven kills that panicked (the probe's next failure asks again).
    pub probe_kills: u64,
}

/// Faults waiting to be triggered.
#[derive(Debug, Default)]
pub struct Faults {
    pub workers: BTreeSet<String>,
    pub pleg: bool,
}
