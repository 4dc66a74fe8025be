//! The kubelet's prober (§5): startup, readiness and liveness workers per container, their
//! thresholds and gating as pure rules (`worker`), the async `ProberManager` running them
//! against a `ProbeRunner` port, and the typed outputs the node acts on. It never touches the
//! API or the runtime itself: readiness, restarts and events leave as `ProberOutput`s, which
//! `ProberActor` routes; `ProbeResults` lets the pod provider's status read the results.

mod actor;
mod debug;
mod manager;
mod output;
mod spec;
mod view;
mod worker;

#[cfg(test)]
mod actor_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod manager_tests;
#[cfg(test)]
mod worker_tests;

pub use actor::{ProbePods, ProberActor, ProberFeedback, ProberKept, ProberPeers};
pub use manager::{ProberManager, ProberMemory, RunningContainer, WorkerKey};
pub use output::{ProberOutput, RestartContainer};
pub use spec::{ProbeKind, ProbeSettings, ProbeSpecError, probe_target};
pub use view::{PodProbeView, ProbeResults, reported_by_api};
pub use worker::{ProbeEvent, ProbeResult, ProbeTotals, Reported, WorkerMemory};

/// The prober's name for the supervisor and the debug endpoint.
pub const NAME: &str = "prober";
