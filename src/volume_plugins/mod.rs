//! The volume manager's disk adapters: the atomic writer, emptyDir and hostPath SetUp and
//! TearDown, containers' subPath binds, pod directory cleanup, and the scan of `<rootDir>/pods` that rebuilds the actual
//! state after a restart; CSI (the node plugin client, the mounter, the plugin watcher and its
//! supervised actor). What to do is decided by the pure core in
//! `nodepulse_actors::volume_manager`; this module only carries it out on the real filesystem.

pub mod atomic_writer;
pub mod csi;
pub mod empty_dir;
pub mod host;
pub mod host_path;
pub mod mount;
pub mod operations;
pub mod ownership;
pub mod payload_paths;
pub mod plugin_watcher;
pub mod plugin_watcher_actor;
pub mod pod_dir;
pub mod reconstruct;
pub mod sub_path;
pub mod sub_path_bind;

use std::{io, path::PathBuf};

/// A filesystem call that failed, with what it was doing and where. Worth retrying.
#[derive(Debug, thiserror::Error)]
#[error("{step} {}: {source}", path.display())]
pub struct FsError {
    pub step: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl FsError {
    /// A `map_err` adapter: `fs::create_dir(p).map_err(FsError::at("create", p))`.
    pub fn at(step: &'static str, path: &std::path::Path) -> impl FnOnce(io::Error) -> FsError {
        let path = path.to_path_buf();
        move |source| FsError { step, path, source }
    }
}
