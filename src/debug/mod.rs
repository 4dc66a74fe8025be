//! The debug endpoint: a small HTTP/1 server (hyper) on the daemon's main thread, on loopback
//! by default. The route table is in `routes.rs`.
//!
//! Routes:
//! - `GET /debug/` — an HTML page of the actor tree that refreshes itself
//! - `GET /debug/actors[?node=]` — every actor's state, restarts and mailbox figures (JSON)
//! - `GET /debug/actors/{name}[?node=]` — one actor, plus its own state snapshot
//! - `POST /debug/actors/{name}/kill?mode=stop|panic|hang[&node=]` — fault injection, when
//!   enabled in the configuration, with `Authorization: Bearer <token>`
//! - `GET /debug/node[?node=]` — the Node status as last computed and sent, and why
//! - `GET /debug/volumes[?node=]` — the volume manager's desired and actual state per pod
//! - `GET /debug/probes[?node=]` — the prober's workers: last result, consecutive counts, next run
//! - `GET /debug/kubelet-api` — the kubelet API's connections and streams open now
//! - `GET /healthz` — "ok", or 503 with the reasons
//! - `GET /metrics` — the OpenMetrics text format: the registry handed to [`start`], plus
//!   every actor's figures
//!
//! Every error is JSON: `{"error":{"code","reason","message"}}`. A request whose `Host` is
//! not a loopback name or the bound address is refused (`host.rs`); idle connections cannot
//! keep others out (`connections.rs`).

mod actors;
mod auth;
mod connections;
mod error;
mod health;
mod host;
mod kubelet_api;
pub mod metrics;
mod nodes;
mod probes;
mod reply;
mod routes;
mod server;

use std::{net::SocketAddr, num::NonZeroU32, rc::Rc};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use nodepulse_supervisor::SupervisorHandle;
use prometheus_client::registry::Registry;

pub use auth::FaultInjectionGate;
pub use error::DebugError;
pub use nodes::Nodes;
pub use server::{MAX_CONNECTIONS, Server, ServerHandle};

const PAGE: &str = include_str!("page.html");

/// Kill requests allowed per second (with the same burst): enough for any test or person,
/// too few for a flood to keep a node's actors down.
const KILLS_PER_SECOND: u32 = 20;

/// What every route reads.
pub struct DebugContext {
    pub nodes: Nodes,
    pub gate: FaultInjectionGate,
    pub kill_rate: DefaultDirectRateLimiter,
    pub registry: Registry,
    pub node_facts: Option<NodeFacts>,
    pub allowed_hosts: host::AllowedHosts,
}

/// Facts of the whole process that `/debug/node` adds to NodeStatusActor's view (the daemon
/// adds the API server's reachability), so this endpoint need not know where they come from.
pub type NodeFacts = Box<dyn Fn() -> serde_json::Map<String, serde_json::Value> + Send + Sync>;

/// What the endpoint serves besides the supervisors' own views.
#[derive(Default)]
pub struct Extras {
    /// `/metrics` serves it, with the actors' families added.
    pub registry: Registry,
    pub node_facts: Option<NodeFacts>,
}

/// A running debug endpoint.
pub struct DebugServer {
    pub server: Server,
    pub address: SocketAddr,
}

/// Binds `address` and serves the routes for `nodes`, with `extras`. The returned server must
/// be awaited (or spawned) to run; it does not react to signals, the daemon does.
pub fn start(
    address: SocketAddr,
    nodes: Vec<SupervisorHandle>,
    gate: FaultInjectionGate,
    extras: Extras,
) -> std::io::Result<DebugServer> {
    serve(std::net::TcpListener::bind(address)?, nodes, gate, extras)
}

/// [`start`] on a listener bound already.
pub fn serve(
    listener: std::net::TcpListener,
    nodes: Vec<SupervisorHandle>,
    gate: FaultInjectionGate,
    extras: Extras,
) -> std::io::Result<DebugServer> {
    let Extras {
        mut registry,
        node_facts,
    } = extras;
    // Non-blocking, as tokio needs it when the server adopts the socket.
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    if !address.ip().is_loopback() {
        tracing::warn!(%address, "the debug endpoint is bound beyond loopback: anyone who can reach it sees the actors' internals");
    }
    let per_second = NonZeroU32::new(KILLS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
    let nodes = Nodes::new(nodes);
    registry.register_collector(Box::new(metrics::ActorMetrics(nodes.clone())));
    registry.register_collector(Box::new(metrics::KeptPodMetrics));
    let context = Rc::new(DebugContext {
        nodes,
        gate,
        kill_rate: RateLimiter::direct(Quota::per_second(per_second)),
        registry,
        node_facts,
        allowed_hosts: host::AllowedHosts::new(address),
    });
    tracing::info!(%address, "debug endpoint listening");
    Ok(DebugServer {
        server: Server::new(listener, context),
        address,
    })
}
