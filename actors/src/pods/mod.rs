//! The pods bound to this node: PodLifecycleActor watches them and drives a lifecycle provider
//! (the `simulated` one here), whose updates become StatusManager's `SetPodStatus`,
//! `SetContainerReadiness` and `TerminatePod`.

/// The name PodLifecycleActor has in its supervisor, the debug endpoint and the metrics.
pub const NAME: &str = "pod-lifecycle";

mod actor;
pub mod annotations;
pub mod ip_pool;
mod provider;
mod simulated;
mod simulated_status;
#[cfg(test)]
mod tests;

pub use actor::{PodLifecycleActor, PodLifecycleSettings};
pub use provider::{NoPods, Outgoing, PodLifecycleProvider, PodLifecycleState, PodUpdate};
pub use simulated::{SimulatedPods, SimulatedSettings, TICK};
pub use simulated_status::{Placement, Stage, container_id, qos_class, simulated_status};
