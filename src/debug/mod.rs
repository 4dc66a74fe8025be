//! The debug endpoint: a small actix-web server, on loopback by default.
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
//! - `GET /healthz` — "ok", or 503 with the reasons
//! - `GET /metrics` — the OpenMetrics text format: the registry handed to [`start`], plus
//!   every actor's figures
//!
//! Every error is JSON: `{"error":{"code","reason","message"}}`.

mod actors;
mod auth;
mod error;
mod health;
pub mod metrics;
mod nodes;
mod probes;

use std::{net::SocketAddr, num::NonZeroU32};

use actix_web::{
    App, HttpRequest, HttpResponse, HttpServer, dev::Server, error::QueryPayloadError, web,
};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use nodepulse_supervisor::SupervisorHandle;
use prometheus_client::registry::Registry;

pub use auth::FaultInjectionGate;
pub use error::DebugError;
pub use nodes::Nodes;

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
    let Extras {
        mut registry,
        node_facts,
    } = extras;
    if !address.ip().is_loopback() {
        tracing::warn!(%address, "the debug endpoint is bound beyond loopback: anyone who can reach it sees the actors' internals");
    }
    let per_second = NonZeroU32::new(KILLS_PER_SECOND).unwrap_or(NonZeroU32::MIN);
    let nodes = Nodes::new(nodes);
    registry.register_collector(Box::new(metrics::ActorMetrics(nodes.clone())));
    let context = web::Data::new(DebugContext {
        nodes,
        gate,
        kill_rate: RateLimiter::direct(Quota::per_second(per_second)),
        registry,
        node_facts,
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(context.clone())
            .app_data(
                web::QueryConfig::default().error_handler(|error, _| query_error(&error).into()),
            )
            .configure(routes)
    })
    .workers(1)
    .disable_signals()
    .bind(address)?;
    let address = server.addrs().first().copied().unwrap_or(address);
    tracing::info!(%address, "debug endpoint listening");
    Ok(DebugServer {
        server: server.run(),
        address,
    })
}

fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/healthz", web::get().to(health::healthz))
        .route("/metrics", web::get().to(metrics::metrics))
        .route(
            "/debug",
            web::get().to(|| async {
                HttpResponse::PermanentRedirect()
                    .insert_header(("Location", "/debug/"))
                    .finish()
            }),
        )
        .route(
            "/debug/",
            web::get().to(|| async {
                HttpResponse::Ok()
                    .content_type("text/html; charset=utf-8")
                    .body(PAGE)
            }),
        )
        .route("/debug/node", web::get().to(actors::node))
        .route("/debug/volumes", web::get().to(actors::volumes))
        .route("/debug/probes", web::get().to(probes::probes))
        .service(
            web::resource("/debug/actors")
                .get(actors::list)
                .default_service(web::to(method_not_allowed)),
        )
        .service(
            web::resource("/debug/actors/{name}")
                .get(actors::one)
                .default_service(web::to(method_not_allowed)),
        )
        .service(
            web::resource("/debug/actors/{name}/kill")
                .post(actors::kill)
                .default_service(web::to(method_not_allowed)),
        )
        .default_service(web::to(not_found));
}

fn query_error(error: &QueryPayloadError) -> DebugError {
    DebugError::BadRequest(format!("invalid query string: {error}"))
}

async fn method_not_allowed(request: HttpRequest) -> Result<HttpResponse, DebugError> {
    Err(DebugError::MethodNotAllowed(format!(
        "{} is not allowed on {}",
        request.method(),
        request.path()
    )))
}

async fn not_found(request: HttpRequest) -> Result<HttpResponse, DebugError> {
    Err(DebugError::NotFound(format!(
        "no route {} {}; see /debug/ for the actor page, /debug/actors, /healthz and /metrics",
        request.method(),
        request.path()
    )))
}
