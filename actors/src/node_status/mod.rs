//! NodeStatusActor: registers the Node and keeps its status true.
//!
//! Pure parts: `setters` (what the status is), `change` (whether it changed), `report` (whether
//! to send it anyway), `patch` (the body to send), `registration` (the Node to create or
//! adopt). `sync` holds the API work as owned futures; `actor` decides when to run it;
//! `debug` is the view behind `GET /debug/node`.

/// The name NodeStatusActor has in its supervisor, the debug endpoint and the metrics.
pub const NAME: &str = "node-status";

mod actor;
#[cfg(test)]
pub(crate) mod actor_tests;
pub mod change;
mod debug;
#[cfg(test)]
mod eviction_tests;
mod node_view;
pub mod patch;
#[cfg(test)]
mod patch_tests;
pub mod registration;
pub mod report;
pub mod setters;
pub mod sync;

pub use actor::{NodeStatusActor, NodeStatusMemory, NodeStatusSettings};
pub use node_view::NodeView;
