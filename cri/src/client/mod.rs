//! The CRI adapter: one client per node over the container runtime's unix socket with tonic,
//! using the hand-written messages in [`proto`]. It is [`RuntimeService`] here (the signal
//! actors' calls), [`ContainerRuntime`](nodepulse_actors::ports::ContainerRuntime) in [`pods`]
//! (the pod provider's and the prober's). Every call is bounded by `runtimeRequestTimeout`; a
//! broken or timed-out connection is dropped so the next call dials afresh (a runtime that
//! restarted is found again without restarting nodepulse).

mod connection_thread;
mod convert;
mod endpoint;
mod events;
mod oom;
mod pods;
mod process;
pub mod proto;
mod reply_fuzzing;
mod stats;
mod streaming;

pub use oom::{clamp_oom_score_adj, own_oom_score_adj};
pub use process::RuntimeProcess;
#[doc(hidden)]
pub use reply_fuzzing::read_reply;
pub use streaming::StreamingError;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::{
    kubelet_metrics::{KUBELET_METRICS, runtime_operation},
    ports::{
        ImageFsUsage, ImageInfo, RuntimeCondition, RuntimeError, RuntimeFeatures, RuntimeResult,
        RuntimeService, RuntimeStatus, RuntimeVersion,
    },
};

use crate::grpc::{UnaryFailure, UnixGrpc};
pub use endpoint::{EndpointError, socket_path};

/// A CRI client on one unix socket. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct CriClient {
    grpc: UnixGrpc,
    timeout: Duration,
    /// The lowest `oom_score_adj` this process may ask for, read once on first use.
    oom_floor: Arc<oom::OomFloor>,
    /// The thread the connection lives on, for a node's client; kept while a clone is.
    _connection_thread: Option<Arc<connection_thread::ConnectionThread>>,
}

impl CriClient {
    /// A client for `endpoint` (`unix:///run/containerd/containerd.sock`) whose connection
    /// runs on the runtime of the call that dials it. Nothing is dialled until the first call.
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Self, EndpointError> {
        Ok(Self {
            grpc: UnixGrpc::new(socket_path(endpoint)?),
            timeout,
            oom_floor: Arc::default(),
            _connection_thread: None,
        })
    }

    /// A node's one client, shared by all its parts (the signal actors on their arbiters, the
    /// pod provider on its thread, the prober, the services): its connection lives on a thread
    /// of its own, so no caller's stalled runtime holds up another's calls.
    pub fn for_node(endpoint: &str, timeout: Duration) -> Result<Self, EndpointError> {
        let mut client = Self::new(endpoint, timeout)?;
        match connection_thread::ConnectionThread::start() {
            Ok(thread) => {
                client.grpc = client.grpc.with_executor(thread.runtime());
                client._connection_thread = Some(Arc::new(thread));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot start the CRI connection's thread; the connection runs on its callers' runtimes");
            }
        }
        Ok(client)
    }

    pub fn socket(&self) -> &Path {
        self.grpc.socket()
    }

    /// One unary call, bounded by the request timeout; any error status is a failed call.
    fn call<Request, Response>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Request,
    ) -> BoxFuture<'static, RuntimeResult<Response>>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        self.call_as(method, path, request, CallFailure::into_runtime_error)
    }

    /// One unary call bounded by the request timeout, its failure told as `error` says (the
    /// signal actors' [`RuntimeError`], the pod calls' error that tells NotFound apart).
    fn call_as<Request, Response, Error>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Request,
        error: fn(CallFailure, &'static str) -> Error,
    ) -> BoxFuture<'static, Result<Response, Error>>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
        Error: Send + 'static,
    {
        self.unary(method, path, request, self.timeout)
            .map(move |result| result.map_err(|failure| error(failure, method)))
            .boxed()
    }

    /// One unary call bounded by `timeout`, the runtime's error status kept for the caller to
    /// tell NotFound and DeadlineExceeded apart.
    fn unary<Request, Response>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Request,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Response, CallFailure>>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        let grpc = self.grpc.clone();
        async move {
            let operation = runtime_operation(method);
            let started = tokio::time::Instant::now();
            let outcome = Self::unary_call(&grpc, method, path, request, timeout).await;
            // As the kubelet's instrumented runtime service counts every call, by operation.
            let metrics = &KUBELET_METRICS;
            metrics.runtime_operations.inc(&[&operation]);
            let took = started.elapsed().as_secs_f64();
            metrics
                .runtime_operations_duration
                .observe(&[&operation], took);
            if outcome.is_err() {
                metrics.runtime_operations_errors.inc(&[&operation]);
            }
            outcome
        }
        .boxed()
    }

    async fn unary_call<Request, Response>(
        grpc: &UnixGrpc,
        method: &'static str,
        path: &'static str,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, CallFailure>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        {
            let path_buf = || grpc.socket().to_path_buf();
            if !grpc.socket().exists() {
                grpc.forget_connection();
                return Err(CallFailure::Transport(RuntimeError::SocketMissing {
                    path: path_buf(),
                }));
            }
            grpc.unary(path, request, timeout)
                .await
                .map_err(|failure| match failure {
                    UnaryFailure::Unreachable(message) => {
                        CallFailure::Transport(RuntimeError::Unreachable {
                            path: path_buf(),
                            message,
                        })
                    }
                    UnaryFailure::Timeout => {
                        CallFailure::Transport(RuntimeError::Timeout { method, timeout })
                    }
                    UnaryFailure::Status { code, message } => CallFailure::Status { code, message },
                })
        }
    }
}

/// One filesystem's usage; none without the filesystem it is about.
fn filesystem_usage(fs: proto::FilesystemUsage) -> Option<ImageFsUsage> {
    let mountpoint = fs.fs_id?.mountpoint;
    Some(ImageFsUsage {
        mountpoint: PathBuf::from(mountpoint),
        used_bytes: fs.used_bytes.map(|used| used.value),
        inodes_used: fs.inodes_used.map(|used| used.value),
    })
}

/// How one call failed: on the way (no socket, no connection, no answer in time), or with the
/// runtime's error status.
#[derive(Debug)]
enum CallFailure {
    Transport(RuntimeError),
    Status { code: tonic::Code, message: String },
}

impl CallFailure {
    fn into_runtime_error(self, method: &'static str) -> RuntimeError {
        match self {
            Self::Transport(error) => error,
            Self::Status { code, message } => RuntimeError::Call {
                method,
                message: format!("{code}: {message}"),
            },
        }
    }
}

impl RuntimeService for CriClient {
    fn status(&self) -> BoxFuture<'static, RuntimeResult<RuntimeStatus>> {
        let call = self.call::<_, proto::StatusResponse>(
            "Status",
            proto::paths::STATUS,
            proto::StatusRequest { verbose: false },
        );
        async move {
            // The kubelet treats an answer without a status like a failed call.
            let response = call.await?;
            let status = response.status.ok_or(RuntimeError::Call {
                method: "Status",
                message: "the runtime answered without a status".to_owned(),
            })?;
            Ok(RuntimeStatus {
                conditions: status
                    .conditions
                    .into_iter()
                    .map(|condition| RuntimeCondition {
                        kind: condition.r#type,
                        status: condition.status,
                        reason: condition.reason,
                        message: condition.message,
                    })
                    .collect(),
                handlers: response
                    .runtime_handlers
                    .into_iter()
                    .map(convert::runtime_handler)
                    .collect(),
                features: response.features.map(|features| RuntimeFeatures {
                    supplemental_groups_policy: features.supplemental_groups_policy,
                    user_namespaces_host_network: features.user_namespaces_host_network,
                }),
            })
        }
        .boxed()
    }

    fn version(&self) -> BoxFuture<'static, RuntimeResult<RuntimeVersion>> {
        let call = self.call::<_, proto::VersionResponse>(
            "Version",
            proto::paths::VERSION,
            proto::VersionRequest {
                version: "v1".to_owned(),
            },
        );
        async move {
            let version = call.await?;
            Ok(RuntimeVersion {
                runtime_name: version.runtime_name,
                runtime_version: version.runtime_version,
                runtime_api_version: version.runtime_api_version,
            })
        }
        .boxed()
    }

    fn image_fs_info(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>> {
        let call = self.call::<_, proto::ImageFsInfoResponse>(
            "ImageFsInfo",
            proto::paths::IMAGE_FS_INFO,
            proto::ImageFsInfoRequest {},
        );
        async move {
            Ok(call
                .await?
                .image_filesystems
                .into_iter()
                .filter_map(filesystem_usage)
                .collect())
        }
        .boxed()
    }

    fn list_images(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageInfo>>> {
        let call = self.call::<_, proto::ListImagesResponse>(
            "ListImages",
            proto::paths::LIST_IMAGES,
            proto::ListImagesRequest { filter: None },
        );
        async move {
            Ok(call
                .await?
                .images
                .into_iter()
                .map(convert::image_info)
                .collect())
        }
        .boxed()
    }

    fn update_pod_cidr(&self, pod_cidr: String) -> BoxFuture<'static, RuntimeResult<()>> {
        let request = proto::UpdateRuntimeConfigRequest {
            runtime_config: Some(proto::RuntimeConfig {
                network_config: Some(proto::NetworkConfig { pod_cidr }),
            }),
        };
        self.call::<_, proto::UpdateRuntimeConfigResponse>(
            "UpdateRuntimeConfig",
            proto::paths::UPDATE_RUNTIME_CONFIG,
            request,
        )
        .map(|result| result.map(|_| ()))
        .boxed()
    }
}
