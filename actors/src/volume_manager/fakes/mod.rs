//! In-memory fakes of the volume manager's ports, for actor tests.

pub mod csi;
pub mod objects;
