//! The container runtime endpoint's syntax: only unix sockets, as `unix:///absolute/path.sock`.
//! Here, in the CRI client, whose dialling and the daemon's validation parse it the same way.

use std::path::PathBuf;

/// Why an endpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported container runtime endpoint {0:?}: expected unix:///absolute/path.sock")]
pub struct EndpointError(pub String);

/// The socket path of a `unix://` endpoint.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, EndpointError> {
    match endpoint.strip_prefix("unix://") {
        Some(path) if path.starts_with('/') && path.len() > 1 => Ok(PathBuf::from(path)),
        _ => Err(EndpointError(endpoint.to_owned())),
    }
}
