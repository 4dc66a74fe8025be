//! Unary gRPC calls over one unix socket, shared by the CRI client and the CSI clients (and
//! the CRI event stream, a server-streaming call). The
//! connection is dialled lazily and dropped after a transport failure or a timeout, so a runtime
//! or driver that restarted is found again on the next call without restarting nodepulse. Its
//! tasks run on the caller's runtime, or on the one [`UnixGrpc::with_executor`] names. The
//! callers turn a [`UnaryFailure`] into their own typed errors.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::{StreamExt, stream::BoxStream};
use hyper_util::rt::TokioIo;
use tonic::{
    codegen::http::{Uri, uri::PathAndQuery},
    transport::{Channel, Endpoint},
};

/// A gRPC client on one unix socket. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct UnixGrpc {
    socket: Arc<PathBuf>,
    /// The current connection; `None` after a failure, until the next call dials again.
    channel: Arc<Mutex<Option<Channel>>>,
    /// Where the connection's tasks run; `None`: on the runtime of the call that dials.
    executor: Option<tokio::runtime::Handle>,
}

/// How one call failed.
#[derive(Debug)]
pub enum UnaryFailure {
    /// No connection could be made or kept (refused, reset, closed: the peer is gone or
    /// restarting), with tonic's text.
    Unreachable(String),
    /// No answer within the call's timeout.
    Timeout,
    /// The peer answered with an error status.
    Status { code: tonic::Code, message: String },
}

impl UnixGrpc {
    /// A client for the socket at `socket`. Nothing is dialled until the first call.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: Arc::new(socket.into()),
            channel: Arc::new(Mutex::new(None)),
            executor: None,
        }
    }

    /// Runs the connection's tasks on `runtime`, whichever runtime each call comes from: a
    /// caller whose runtime stalls or ends (an abandoned actor's arbiter) does not take the
    /// connection of the others with it.
    #[must_use]
    pub fn with_executor(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.executor = Some(runtime);
        self
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn channel(&self, timeout: Duration) -> Channel {
        let mut slot = self.channel.lock().unwrap_or_else(PoisonError::into_inner);
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
            let endpoint = Endpoint::from_static("http://unix.socket").connect_timeout(timeout);
            let endpoint = match &self.executor {
                Some(runtime) => endpoint.executor(OnRuntime(runtime.clone())),
                None => endpoint,
            };
            endpoint.connect_with_connector_lazy(connector)
        })
        .clone()
    }

    /// Drops the connection: the next call dials afresh.
    pub fn forget_connection(&self) {
        *self.channel.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// One unary call at `path` (`/package.Service/Method`), bounded by `timeout`. A transport
    /// failure or a timeout drops the connection.
    pub async fn unary<Request, Response>(
        &self,
        path: &'static str,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, UnaryFailure>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        let exchange = async {
            let mut grpc = self.ready(timeout).await?;
            grpc.unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::<Request, Response>::new(),
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(failure)
        };
        self.bounded(timeout, exchange).await
    }

    /// A server-streaming call at `path`: the stream once the peer accepted it within
    /// `timeout`, then its messages as they come, for as long as the peer keeps it open.
    pub async fn server_streaming<Request, Response>(
        &self,
        path: &'static str,
        request: Request,
        timeout: Duration,
    ) -> Result<BoxStream<'static, Result<Response, UnaryFailure>>, UnaryFailure>
    where
        Request: prost::Message + Send + Sync + 'static,
        Response: prost::Message + Default + Send + Sync + 'static,
    {
        let open = async {
            let mut grpc = self.ready(timeout).await?;
            grpc.server_streaming(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::<Request, Response>::new(),
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(failure)
        };
        let stream = self.bounded(timeout, open).await?;
        Ok(stream.map(|item| item.map_err(failure)).boxed())
    }

    /// A client on the connection, once it can take a call.
    async fn ready(&self, timeout: Duration) -> Result<tonic::client::Grpc<Channel>, UnaryFailure> {
        let mut grpc = tonic::client::Grpc::new(self.channel(timeout));
        grpc.ready()
            .await
            .map_err(|error| UnaryFailure::Unreachable(error.to_string()))?;
        Ok(grpc)
    }

    /// `call` bounded by `timeout`; a transport failure or a timeout drops the connection.
    async fn bounded<T>(
        &self,
        timeout: Duration,
        call: impl Future<Output = Result<T, UnaryFailure>>,
    ) -> Result<T, UnaryFailure> {
        let result = tokio::time::timeout(timeout, call)
            .await
            .unwrap_or(Err(UnaryFailure::Timeout));
        if matches!(
            result,
            Err(UnaryFailure::Unreachable(_) | UnaryFailure::Timeout)
        ) {
            self.forget_connection();
        }
        result
    }
}

/// Spawns the connection's tasks on one runtime.
#[derive(Clone)]
struct OnRuntime(tokio::runtime::Handle);

impl<F> hyper::rt::Executor<F> for OnRuntime
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        drop(self.0.spawn(future));
    }
}

/// The peer's error status; Unavailable means the connection is gone.
fn failure(status: tonic::Status) -> UnaryFailure {
    match status.code() {
        tonic::Code::Unavailable => UnaryFailure::Unreachable(status.message().to_owned()),
        code => UnaryFailure::Status {
            code,
            message: status.message().to_owned(),
        },
    }
}
