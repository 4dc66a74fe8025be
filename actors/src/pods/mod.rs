//! The pods bound to this node: PodLifecycleActor watches them and drives a lifecycle provider
//! (`simulated`, or for real containers the `nodepulse-cri` crate's), whose updates become
//! StatusManager's `SetPodStatus`, `SetContainerReadiness` and `TerminatePod`. Beside it, the
//! kubelet's pure pod rules a real provider applies: [`admission`], the container environment
//! ([`env`]) and [`images`].

mod actor;
#[cfg(test)]
mod actor_tests;
pub mod admission;
#[cfg(test)]
mod admission_tests;
pub mod annotations;
pub mod apparmor;
pub mod cgroups;
pub mod env;
mod env_file;
mod env_sources;
#[cfg(test)]
mod env_tests;
mod field_ref;
pub mod image_ref;
pub mod images;
#[cfg(test)]
mod images_tests;
pub mod ip_pool;
mod node_affinity;
pub mod pod_fields;
#[cfg(test)]
mod pod_fields_tests;
pub mod pod_requests;
mod provider;
pub mod pull_auth;
mod pull_backoff;
mod qos;
pub mod readiness_gates;
mod resource_field;
pub mod service_env;
mod simulated;
mod simulated_status;
mod starting;
pub mod sysctls;
#[cfg(test)]
mod tests;

pub use crate::ports::{
    ContainerRecord, PodRecord, PodsPublisher, PodsSnapshot, PodsView, SandboxRecord,
};
pub use actor::{InjectProviderFault, PodLifecycleActor, PodLifecycleSettings};
pub use provider::{
    Outgoing, PodLifecycleProvider, PodLifecycleState, PodUpdate, ProviderFault, UpdateSink,
};
pub use qos::qos_class;
pub use simulated::{SimulatedPods, SimulatedSettings};
pub use simulated_status::{Placement, Stage, condition, container_id, simulated_status};
pub use starting::{Start, StartError, StartHealth, StartingProvider};

/// The name PodLifecycleActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "pod-lifecycle";
