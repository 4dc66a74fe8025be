//! nodepulse's node actors, the typed messages they exchange and the ports (traits) through
//! which they reach the API server and the host.
//!
//! - [`clock`]: the one clock: tokio's for timers, an injected wall clock for timestamps.
//! - [`config_source`]: where a pod came from (the `kubernetes.io/config.*` annotations):
//!   static pods and their mirror pods.
//! - [`eviction`]: EvictionSignalActor, the host's pressure signals against the thresholds.
//! - [`expansion`]: the kubelet's `$(VAR)` expansion, for env values and probe commands.
//! - [`go_duration`]: Go's duration text, for the kubelet's messages.
//! - [`image_gc`]: ImageGcActor, the kubelet's image manager: unused images removed under disk use.
//! - [`kept_pod`]: a pod version kept as its packed JSON, decoded while it is new.
//! - [`kubelet_metrics`]: the kubelet's `/metrics` families measured as the work happens.
//! - [`lease`]: LeaseActor, the Node's Lease in `kube-node-lease`.
//! - [`log_rotation`]: LogRotationActor, the kubelet's container log manager (size-based rotation).
//! - [`messages`]: one type per fact the actors tell each other.
//! - [`pods`]: PodLifecycleActor, the simulated pod lifecycle provider and the kubelet's pure pod
//!   rules (admission, container environment, images).
//! - [`prober`]: the kubelet's probe workers (startup, readiness, liveness) and their outputs.
//! - [`ports`]: the API interfaces the daemon implements with kube-rs and tests with fakes.
//! - [`quantity`]: Kubernetes resource quantities as numbers.
//! - [`runtime_probe`]: RuntimeProbeActor, the container runtime's health over CRI.
//! - [`shrink`]: hash maps shrunk back after removals, so what was deleted leaves no table.
//!
//! Each actor's module names it for the supervisor and the debug endpoint (`lease::NAME`,
//! `node_status::NAME`, ...), so the daemon wires them without string literals.

pub mod clock;
pub mod config_source;
pub mod eviction;
pub mod expansion;
pub mod go_duration;
pub mod image_gc;
pub mod kept_pod;
pub mod kubelet_metrics;
pub mod lease;
pub mod log_rotation;
pub mod messages;
pub mod node_status;
pub mod pods;
pub mod ports;
pub mod prober;
pub use nodepulse_validation::quantity;
pub mod retry;
pub mod runtime_probe;
pub mod shrink;
pub mod status_manager;
pub mod volume_manager;
