//! The HTTP server's life: serving on the bound listener until shutdown, and going really down
//! for an outage (see `faults::outage`): the listener closed and connections cut (or watches
//! ended cleanly first), then the same address bound again over the same store. Owns the
//! actix-web server; never touches the objects it serves.

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpServer, web};
use tokio::sync::watch;

use crate::config::{AuthConfig, WatchConfig};
use crate::faults::FaultHandle;
use crate::faults::outage::Outage;
use crate::http::{self, AppState, Ending};
use crate::request_log::RequestLog;
use crate::store::Store;

/// How long a listener that cannot be bound again waits before the next try (the port may be
/// held for a moment by a connection the outage cut).
const REBIND_EVERY: Duration = Duration::from_millis(50);

/// What every serving period shares: the same objects, faults and configuration.
#[derive(Clone)]
pub(crate) struct Parts {
    pub store: Arc<Store>,
    pub faults: FaultHandle,
    pub auth: AuthConfig,
    pub watch: WatchConfig,
    pub requests: RequestLog,
    pub workers: usize,
    pub kubelet: Arc<crate::kubelet_client::KubeletClient>,
    pub kubelet_addresses: crate::kubelet_client::KubeletAddresses,
    /// HTTPS with optional client certificates, when set; plain HTTP otherwise.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// The running actix-web server, if any, for a handle dropped without an async shutdown.
pub(crate) type CurrentServer = Arc<Mutex<Option<ServerHandle>>>;

/// Starts the HTTP workers on `listener`; `ending` flips when this serving period ends, so
/// long-running watches end with it.
pub(crate) fn start_http(
    listener: TcpListener,
    parts: &Parts,
    ending: watch::Receiver<Ending>,
) -> std::io::Result<Server> {
    let state = web::Data::new(AppState {
        store: parts.store.clone(),
        faults: parts.faults.clone(),
        auth: parts.auth.clone(),
        watch: parts.watch.clone(),
        requests: parts.requests.clone(),
        shutdown: ending,
        kubelet: Arc::clone(&parts.kubelet),
        kubelet_addresses: parts.kubelet_addresses.clone(),
    });
    let fault_data = web::Data::new(parts.faults.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(fault_data.clone())
            // kube-apiserver accepts request bodies up to 3 MiB.
            .app_data(web::PayloadConfig::new(3 * 1024 * 1024))
            .configure(http::configure)
    })
    .workers(parts.workers.max(1))
    .disable_signals()
    .shutdown_timeout(1)
    .on_connect(crate::tls::remember_client_certificate);
    let server = match &parts.tls {
        Some(tls) => server.listen_rustls_0_23(listener, (**tls).clone())?,
        None => server.listen(listener)?,
    };
    Ok(server.run())
}

/// Serves `server` until `shutdown`, going down and coming back for every outage asked for.
pub(crate) async fn serve(
    mut server: Server,
    mut ending: watch::Sender<Ending>,
    address: SocketAddr,
    parts: Parts,
    current: CurrentServer,
    mut shutdown: watch::Receiver<bool>,
) {
    let switch = parts.faults.outage_switch().clone();
    loop {
        let handle = server.handle();
        *current.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle.clone());
        let running = tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "emulator HTTP server failed");
            }
        });
        let (outage, start_after) = tokio::select! {
            () = stopped(&mut shutdown) => {
                let _ = ending.send(Ending::Clean);
                handle.stop(true).await;
                let _ = running.await;
                return;
            }
            requested = switch.requested() => requested,
        };
        tokio::time::sleep(start_after).await;
        switch.went_down();
        go_down(&outage, &handle, &ending, address).await;
        current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let _ = running.await;
        tokio::select! {
            () = stopped(&mut shutdown) => return,
            () = tokio::time::sleep(outage.duration()) => {}
        }
        // Back from the bind on: the kernel queues connections from then, and the first
        // request may be served before the workers' start is reported here.
        let mut bound_at = std::time::Instant::now();
        let (next, next_ending) = loop {
            let (sender, receiver) = watch::channel(Ending::Serving);
            let started = rebind(address).and_then(|listener| {
                bound_at = std::time::Instant::now();
                start_http(listener, &parts, receiver)
            });
            match started {
                Ok(next) => break (next, sender),
                Err(error) => {
                    tracing::warn!(%address, %error, "cannot serve again yet; retrying");
                    tokio::time::sleep(REBIND_EVERY).await;
                }
            }
        };
        (server, ending) = (next, next_ending);
        switch.came_back(bound_at);
        tracing::info!(%address, "emulator serving again after the outage");
    }
}

/// Closes the listener and ends every connection: a graceful outage first ends the watches
/// cleanly and lets answers in flight finish (within the server's 1 s shutdown timeout); an
/// abrupt one drops every connection as a killed process does.
async fn go_down(
    outage: &Outage,
    handle: &ServerHandle,
    ending: &watch::Sender<Ending>,
    address: SocketAddr,
) {
    tracing::info!(%address, ?outage, "emulator going down");
    if outage.graceful {
        let _ = ending.send(Ending::Clean);
        handle.stop(true).await;
    } else {
        // Cut first: a watch still polled while the workers stop must not end cleanly.
        let _ = ending.send(Ending::Cut);
        handle.stop(false).await;
    }
}

/// Resolves once the emulator shuts down.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopped| *stopped).await;
}

fn rebind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address)
}
