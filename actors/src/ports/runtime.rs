//! The container runtime, as RuntimeProbeActor and EvictionSignalActor reach it: the few CRI
//! calls nodepulse makes. The daemon implements it over the runtime's unix socket; tests use
//! a real containerd or a fake. Every call is bounded by the adapter's request timeout.

use std::{path::PathBuf, time::Duration};

use futures::future::BoxFuture;

/// One condition of CRI `RuntimeStatus` (`RuntimeReady`, `NetworkReady`, or informative ones).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeCondition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// The conditions, handlers and features CRI `Status` reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeStatus {
    pub conditions: Vec<RuntimeCondition>,
    /// Empty when the runtime predates `StatusResponse.runtime_handlers` (containerd 1.6).
    pub handlers: Vec<RuntimeHandler>,
    /// `None` when the runtime predates `StatusResponse.features`.
    pub features: Option<RuntimeFeatures>,
}

/// One runtime handler (CRI `RuntimeHandler`) and what it can do; the default one is named "".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeHandler {
    pub name: String,
    pub supports_recursive_read_only_mounts: bool,
    pub supports_user_namespaces: bool,
}

/// What the runtime as a whole can do (CRI `RuntimeFeatures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeFeatures {
    pub supplemental_groups_policy: bool,
    pub user_namespaces_host_network: bool,
}

/// The runtime's handlers and features as the last good `Status` reported them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeCapabilities {
    /// Empty when the runtime predates the list (containerd 1.6): nothing is supported.
    pub handlers: Vec<RuntimeHandler>,
    pub features: Option<RuntimeFeatures>,
}

/// The kubelet's `HandlerSupportsUserNamespaces` error: the runtime lists handlers, but not
/// the one a pod asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the handler {0:?} is not known")]
pub struct UnknownHandler(pub String);

impl RuntimeCapabilities {
    fn handler(&self, name: &str) -> Option<&RuntimeHandler> {
        self.handlers.iter().find(|handler| handler.name == name)
    }

    /// Whether handler `name` ("" for the default) can run a pod in its own user namespace:
    /// no when the runtime lists no handlers at all, an error when it lists others only.
    pub fn handler_supports_user_namespaces(&self, name: &str) -> Result<bool, UnknownHandler> {
        if self.handlers.is_empty() {
            return Ok(false);
        }
        self.handler(name)
            .map(|handler| handler.supports_user_namespaces)
            .ok_or_else(|| UnknownHandler(name.to_owned()))
    }

    /// Whether handler `name` can make a mount read-only recursively (the kubelet's
    /// `runtimeHandlerSupportsRecursiveReadOnlyMounts`: an unknown handler cannot).
    pub fn handler_supports_recursive_read_only(&self, name: &str) -> bool {
        let supported = self.handler(name);
        if supported.is_none() && !self.handlers.is_empty() {
            tracing::error!(runtime_handler = name, "Unknown runtime handler");
        }
        supported.is_some_and(|handler| handler.supports_recursive_read_only_mounts)
    }
}

/// CRI `Version`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

/// One filesystem of CRI `ImageFsInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageFsUsage {
    /// Where the runtime keeps its images; statvfs of it gives the image fs' free space.
    pub mountpoint: PathBuf,
    pub used_bytes: Option<u64>,
    pub inodes_used: Option<u64>,
}

/// Why a runtime call failed. Every variant may clear up by itself, so callers retry on their
/// next period rather than at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// Nothing listens at the endpoint: the socket file does not exist.
    #[error("no container runtime socket at {path}")]
    SocketMissing { path: PathBuf },
    /// The socket exists but the runtime did not accept a connection or the stream broke.
    #[error("cannot reach the container runtime at {path}: {message}")]
    Unreachable { path: PathBuf, message: String },
    /// No answer within the request timeout.
    #[error("{method} timed out after {timeout:?}")]
    Timeout {
        method: &'static str,
        timeout: Duration,
    },
    /// The runtime answered with an error status, or with an empty answer.
    #[error("{method} failed: {message}")]
    Call {
        method: &'static str,
        message: String,
    },
}

pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// The CRI calls nodepulse makes. Futures are `'static` so the actors can spawn them beside
/// their mailbox.
pub trait RuntimeService: Send + Sync + 'static {
    /// `RuntimeService/Status` (verbose=false).
    fn status(&self) -> BoxFuture<'static, RuntimeResult<RuntimeStatus>>;
    /// `RuntimeService/Version`.
    fn version(&self) -> BoxFuture<'static, RuntimeResult<RuntimeVersion>>;
    /// `ImageService/ImageFsInfo`: the image filesystems.
    fn image_fs_info(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>>;
    /// `RuntimeService/UpdateRuntimeConfig` with `network_config.pod_cidr`.
    fn update_pod_cidr(&self, pod_cidr: String) -> BoxFuture<'static, RuntimeResult<()>>;
    /// `ImageService/ListImages`: every image, for the Node's `status.images`.
    fn list_images(&self) -> BoxFuture<'static, RuntimeResult<Vec<super::ImageInfo>>>;
}
