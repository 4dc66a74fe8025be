//! The HTTP front end (actix-web). Routes:
//!
//! - discovery and health (`discovery`): `/version`, `/healthz`, `/readyz`, `/livez`, `/api`,
//!   `/api/v1`, `/apis`, `/apis/{group}[/{version}]`;
//! - fault-injection admin API: `/emulator/v1/faults[/{id}]`;
//! - `POST` TokenReviews and SubjectAccessReviews (`reviews`), created and never stored;
//! - `GET pods/{name}/log` (`pod_log`), `pods/{name}/exec|attach|portforward` (`pod_stream`)
//!   and `nodes/{name}/proxy/...` (`node_proxy`), proxied to the node's kubelet API;
//! - every other `/api/...` and `/apis/...` path: the resource API (`dispatch`), which
//!   authenticates, applies injected faults, authorizes and calls a verb handler.

mod auth;
pub(crate) use auth::CertificateUser;
mod bootstrap_token;
mod discovery;
mod dispatch;
mod events_view;
mod handlers;
mod node_proxy;
mod pod_log;
mod pod_stream;
mod query;
mod reviews;
mod table;
mod watch;

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde_json::Value;

use crate::api::ApiError;
use crate::config::{AuthConfig, WatchConfig};
use crate::faults::FaultHandle;
use crate::request_log::RequestLog;
use crate::store::Store;

/// Shared state of every worker.
pub struct AppState {
    pub store: Arc<Store>,
    pub faults: FaultHandle,
    pub auth: AuthConfig,
    pub watch: WatchConfig,
    /// Every served resource request, for tests (see `request_log`).
    pub requests: RequestLog,
    /// How this serving period ends, so long-running watches end with it.
    pub shutdown: tokio::sync::watch::Receiver<Ending>,
    /// How `pods/log` reaches a node's kubelet API, and which Node address it dials.
    pub kubelet: Arc<crate::kubelet_client::KubeletClient>,
    pub kubelet_addresses: crate::kubelet_client::KubeletAddresses,
}

/// How a serving period is ending, as its watches see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Serving,
    /// Shutdown or a graceful outage: watches end cleanly, as a terminating kube-apiserver
    /// ends them.
    Clean,
    /// An abrupt outage: watches are cut, their responses never finished, as a killed
    /// process leaves them.
    Cut,
}

/// Registers every route on an actix-web app.
pub fn configure(config: &mut web::ServiceConfig) {
    discovery::configure(config);
    crate::faults::admin::configure(config);
    reviews::configure(config);
    pod_log::configure(config);
    pod_stream::configure(config);
    node_proxy::configure(config);
    config.default_service(web::to(dispatch::dispatch));
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, body: &Value) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(body.to_string())
}

/// The `Status` response for an error, with `Retry-After` when the error carries one.
pub fn error_response(error: &ApiError) -> HttpResponse {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = HttpResponse::build(status);
    if let Some(seconds) = error.retry_after() {
        response.insert_header(("Retry-After", seconds.to_string()));
    }
    response
        .content_type("application/json")
        .body(error.to_status().to_string())
}
