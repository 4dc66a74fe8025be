//! The pods bound to this node: PodLifecycleActor watches them and drives a lifecycle provider
//! (the `simulated` one here), whose updates become StatusManager's `SetPodStatus`,
//! `SetContainerReadiness` and `TerminatePod`.

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
pub use simulated::{SimulatedPods, SimulatedSettings};
pub use simulated_status::{Placement, Stage, container_id, qos_class, simulated_status};

/// The name PodLifecycleActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "pod-lifecycle";
