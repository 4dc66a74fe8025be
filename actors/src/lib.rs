//! nodepulse's node actors, the typed messages they exchange and the ports (traits) through
//! which they reach the API server and the host.
//!
//! - [`lease`]: LeaseActor, the Node's Lease in `kube-node-lease`.
//! - [`messages`]: one type per fact the actors tell each other.
//! - [`ports`]: the API interfaces the daemon implements with kube-rs and tests with fakes.
//! - [`quantity`]: Kubernetes resource quantities as numbers.
//!
//! NodeStatus, RuntimeProbe, EvictionSignal and StatusManager join as they are built.

pub mod lease;
pub mod messages;
pub mod node_status;
pub mod ports;
pub mod quantity;
