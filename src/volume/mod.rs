//! The volume manager's disk adapters: the atomic writer, emptyDir and hostPath SetUp and
//! TearDown, pod directory cleanup, and the scan of `<rootDir>/pods` that rebuilds the actual
//! state after a restart. What to do is decided by the pure core in
//! `nodepulse_actors::volume_manager`; this module only carries it out on the real filesystem.

pub mod atomic_writer;
pub mod empty_dir;
pub mod host_path;
pub mod mount;
pub mod operations;
pub mod pod_dir;
pub mod reconstruct;
