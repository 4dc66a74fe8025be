//! NodeStatusActor: registers the Node and keeps its status true.
//!
//! Pure parts: `setters` (what the status is), `change` (whether it changed), `report` (whether
//! to send it anyway), `patch` (the body to send).

pub mod change;
pub mod patch;
#[cfg(test)]
mod patch_tests;
pub mod registration;
pub mod report;
pub mod setters;
