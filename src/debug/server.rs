//! Serving the routes over HTTP/1 with hyper, on the runtime of whoever polls [`Server`] (the
//! daemon's main thread): no worker or acceptor threads and no timers while idle. The main
//! thread stays free when an actor hangs, since every actor runs on its own arbiter.

use std::{
    cell::RefCell,
    convert::Infallible,
    future::Future,
    pin::Pin,
    rc::Rc,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::future::{AbortHandle, Abortable};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::Notify};

use super::{DebugContext, connections::Connections, routes};

/// A client that has not sent its request headers by then is dropped, so idle half-open
/// connections cannot pile up (actix-web's request timeout was the same 5 s).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once: room for a burst of a few hundred requests (an operator's
/// curl and a Prometheus scrape need a handful), well below a process's usual 1,024 open
/// files, and a bound on what a flood of clients can hold. A new connection is always
/// accepted; at the cap an idle one is closed for it (`connections.rs`).
pub const MAX_CONNECTIONS: usize = 256;
/// A connection's whole life, so a client that never reads its answer does not hold it (and
/// its buffers) forever; a scrape of even a 10,000-node fleet takes seconds.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Per-connection read buffer: request heads here are a few hundred bytes.
const MAX_BUFFER: usize = 64 * 1024;

/// The accept loop. Poll it (spawn it on a local runtime) to serve; it ends when stopped.
pub struct Server {
    running: Pin<Box<dyn Future<Output = ()>>>,
    stop: Arc<Notify>,
}

/// Stops a [`Server`] from elsewhere.
#[derive(Clone)]
pub struct ServerHandle(Arc<Notify>);

impl ServerHandle {
    /// Stops accepting; requests in flight still get their answers.
    pub fn stop(&self) {
        self.0.notify_one();
    }
}

impl Server {
    pub(super) fn new(listener: std::net::TcpListener, context: Rc<DebugContext>) -> Self {
        let stop = Arc::new(Notify::new());
        let stopped = stop.clone();
        let running = Box::pin(async move {
            let listener = match TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::error!(%error, "the debug endpoint cannot serve its socket");
                    return;
                }
            };
            tokio::select! {
                () = accept(&listener, &context) => {}
                () = stopped.notified() => {}
            }
        });
        Self { running, stop }
    }

    pub fn handle(&self) -> ServerHandle {
        ServerHandle(self.stop.clone())
    }
}

impl Future for Server {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.running.as_mut().poll(cx)
    }
}

async fn accept(listener: &TcpListener, context: &Rc<DebugContext>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_BUFFER)
        // One request a connection: a connection is done as soon as its answer is written (an
        // idle keep-alive connection would hold a place), and no client reuses a connection
        // the server is just closing.
        .keep_alive(false);
    let open = Rc::new(RefCell::new(Connections::new(MAX_CONNECTIONS)));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, most likely: wait instead of spinning on the error.
                tracing::warn!(%error, "the debug endpoint cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (abort, registration) = AbortHandle::new_pair();
        let admitted = open.borrow_mut().admit(abort);
        let context = context.clone();
        let answering = admitted.answering;
        let service = service_fn(move |request: http::Request<Incoming>| {
            answering.set(true);
            let context = context.clone();
            async move {
                let (parts, _body) = request.into_parts();
                let uri = parts.uri;
                let reply = routes::dispatch(
                    context,
                    &parts.method,
                    uri.path(),
                    uri.query(),
                    parts.headers,
                )
                .await;
                Ok::<_, Infallible>(reply)
            }
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let (open, id) = (Rc::clone(&open), admitted.id);
        actix_rt::spawn(async move {
            // A client that goes away mid-request, or is closed for a newer one, is not worth
            // a log line.
            let bounded = tokio::time::timeout(CONNECTION_LIFETIME, connection);
            let _ = Abortable::new(bounded, registration).await;
            open.borrow_mut().ended(id);
        });
    }
}
