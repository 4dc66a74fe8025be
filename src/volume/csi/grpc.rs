//! Unary gRPC calls over one unix socket, for the CSI driver's endpoint and a plugin's
//! registration socket alike. The connection is dialled lazily and dropped after a transport
//! failure or a timeout, so a driver that restarted is found again on the next call. Failures
//! read as gRPC-Go prints them, since the kubelet's messages quote those texts.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use hyper_util::rt::TokioIo;
use nodepulse_actors::ports::CsiCallError;
use tonic::{
    codegen::http::{Uri, uri::PathAndQuery},
    transport::{Channel, Endpoint},
};

/// A gRPC client on one unix socket. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct UnixGrpc {
    socket: Arc<PathBuf>,
    channel: Arc<Mutex<Option<Channel>>>,
}

impl UnixGrpc {
    /// A client for `endpoint`: a socket path, with or without `unix://`. Nothing is dialled
    /// until the first call.
    pub fn new(endpoint: &str) -> Self {
        let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
        Self {
            socket: Arc::new(PathBuf::from(path)),
            channel: Arc::new(Mutex::new(None)),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn channel(&self, timeout: Duration) -> Channel {
        let mut slot = self
            .channel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.get_or_insert_with(|| {
            let socket = Arc::clone(&self.socket);
            let connector = tower::service_fn(move |_: Uri| {
                let socket = Arc::clone(&socket);
                async move {
                    let stream = tokio::net::UnixStream::connect(socket.as_path()).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            });
            // The URI only names the authority for HTTP/2; the connector ignores it.
            Endpoint::from_static("http://csi.plugin")
                .connect_timeout(timeout)
                .connect_with_connector_lazy(connector)
        })
        .clone()
    }

    fn forget_connection(&self) {
        if let Ok(mut slot) = self.channel.lock() {
            *slot = None;
        }
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
        let exchange = async {
            let mut grpc = tonic::client::Grpc::new(self.channel(timeout));
            grpc.ready().await.map_err(|error| CsiCallError {
                code: "Unavailable".to_owned(),
                message: format!("connection error: {error}"),
            })?;
            grpc.unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::<Request, Response>::new(),
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| CsiCallError {
                code: format!("{:?}", status.code()),
                message: status.message().to_owned(),
            })
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(CsiCallError {
                code: "DeadlineExceeded".to_owned(),
                message: "context deadline exceeded".to_owned(),
            }),
        };
        if result
            .as_ref()
            .is_err_and(|error| matches!(error.code.as_str(), "Unavailable" | "DeadlineExceeded"))
        {
            self.forget_connection();
        }
        result
    }
}
