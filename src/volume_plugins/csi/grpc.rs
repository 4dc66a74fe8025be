//! CSI calls over a driver's (or a plugin's registration) socket: the shared unix-socket gRPC
//! client, with failures read as gRPC-Go prints them, since the kubelet's messages quote those
//! texts.

use std::{path::Path, time::Duration};

use nodepulse_actors::ports::CsiCallError;

use nodepulse_cri::grpc::{UnaryFailure, UnixGrpc};

/// A CSI client on one unix socket. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct CsiGrpc(UnixGrpc);

impl CsiGrpc {
    /// A client for `endpoint`: a socket path, with or without `unix://`. Nothing is dialled
    /// until the first call.
    pub fn new(endpoint: &str) -> Self {
        Self(UnixGrpc::new(
            endpoint.strip_prefix("unix://").unwrap_or(endpoint),
        ))
    }

    pub fn socket(&self) -> &Path {
        self.0.socket()
    }

    /// One unary call at `path`, bounded by `timeout`.
    pub async fn unary<Request, Response>(
        &self,
        path: &'static str,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, CsiCallError>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        self.0
            .unary(path, request, timeout)
            .await
            .map_err(|failure| match failure {
                UnaryFailure::Unreachable(message) => CsiCallError {
                    code: "Unavailable".to_owned(),
                    message: format!("connection error: {message}"),
                },
                UnaryFailure::Timeout => CsiCallError {
                    code: "DeadlineExceeded".to_owned(),
                    message: "context deadline exceeded".to_owned(),
                },
                UnaryFailure::Status { code, message } => CsiCallError {
                    code: format!("{code:?}"),
                    message,
                },
            })
    }
}
