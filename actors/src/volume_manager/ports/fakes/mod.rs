//! In-memory fakes of the volume manager's ports, for its actor tests and (behind the `fakes`
//! feature) the CRI engine's: as `ports::fakes` holds the crate's.

pub mod csi;
pub mod objects;
pub mod view;
