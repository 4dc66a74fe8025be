//! StatusManagerActor (§7 of the reference) and its pure core: the versioned pod-status cache,
//! condition ownership, `mergePodStatus`, `TerminatePod`'s final status, readiness flips and the
//! PATCH body. `sync` holds one pod's API work as an owned future; `actor` decides when to run it.

mod actor;
#[cfg(test)]
mod actor_tests;
pub mod cache;
pub mod conditions;
pub mod generation;
pub mod held_status;
pub mod merge;
pub mod patch;
pub mod readiness;
mod served;
pub mod sync;
pub mod terminate;
#[cfg(test)]
mod tests;

pub use actor::{PodStatusStore, StatusManagerActor, StatusManagerSettings};

/// The name StatusManagerActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "status-manager";
