//! The listeners: HTTPS on `address:port` (hyper HTTP/1.1 with upgrades, each connection its
//! own task) and the plain-HTTP healthz on `healthzBindAddress:healthzPort`. A handshake or a
//! request head that does not arrive in time is dropped, so idle half-open connections cannot
//! pile up; answered requests keep their connection alive as the kubelet's Go server does.
//! Every connection sends without Nagle's delay, as Go's do by default: a stream's small frames
//! (an exec's output, then its status) would otherwise wait on the peer's delayed ACK.

use std::{convert::Infallible, sync::Arc, time::Duration};

use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::Notify,
};
use tokio_rustls::TlsAcceptor;

use super::{ApiState, healthz, metrics::KUBELET_API_METRICS, reply, routes};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// `stream` with `TCP_NODELAY` set (Go's default for every TCP connection); a socket that
/// refuses it still serves, only slower.
pub(super) fn no_delay(stream: TcpStream) -> TcpStream {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    stream
}

/// Accepts on `listener` until `stop` is notified.
pub async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    state: Arc<ApiState>,
    stop: Arc<Notify>,
) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => no_delay(stream),
                Err(error) => {
                    // Out of file descriptors, most likely: wait instead of spinning.
                    tracing::warn!(%error, "the kubelet API cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.notified() => return,
        };
        let (acceptor, state) = (acceptor.clone(), Arc::clone(&state));
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
            else {
                return;
            };
            let _open = KUBELET_API_METRICS.connection();
            let peer: Arc<[CertificateDer<'static>]> = tls
                .get_ref()
                .1
                .peer_certificates()
                .map(|chain| chain.iter().map(|der| der.clone().into_owned()).collect())
                .unwrap_or_default();
            let service = service_fn(move |request: http::Request<Incoming>| {
                let (state, peer) = (Arc::clone(&state), Arc::clone(&peer));
                async move { Ok::<_, Infallible>(routes::handle(state, peer, request).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(tls), service)
                .with_upgrades()
                .await;
        });
    }
}

/// The plain-HTTP `/healthz` (only the `ping` check) until `stop` is notified.
pub async fn serve_healthz(listener: TcpListener, stop: Arc<Notify>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => no_delay(stream),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.notified() => return,
        };
        tokio::spawn(async move {
            let service = service_fn(|request: http::Request<Incoming>| async move {
                let path = request.uri().path();
                let query = request.uri().query().unwrap_or("");
                let answer = healthz::answer(path, query, None).unwrap_or_else(|| {
                    reply::text(http::StatusCode::NOT_FOUND, "404 page not found\n")
                });
                Ok::<_, Infallible>(answer)
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
