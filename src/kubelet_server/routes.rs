//! One request's way through the kubelet API: authentication (401 `Unauthorized`), then
//! authorization (403 `Forbidden (…)`, 500 when the review fails), then the route its path
//! names — on every path, as the kubelet's filter runs before its mux, so an unknown path
//! with bad credentials is a 401, not a 404 — and the count in `/metrics`.

use std::{path::Path, sync::Arc};

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use rustls::pki_types::CertificateDer;

use super::{
    ApiState, cadvisor, healthz, kubelet_metrics, logs,
    metrics::KUBELET_API_METRICS,
    node_logs, pods, probe_metrics,
    reply::{self, Reply},
    run, stats, streaming,
};

pub async fn handle(
    state: Arc<ApiState>,
    peer: Arc<[CertificateDer<'static>]>,
    request: Request<Incoming>,
) -> Reply {
    let path = request.uri().path().to_owned();
    let reply = guarded(&state, &peer, request).await;
    KUBELET_API_METRICS.request(&path, reply.status().as_u16());
    reply
}

async fn guarded(
    state: &ApiState,
    peer: &[CertificateDer<'static>],
    request: Request<Incoming>,
) -> Reply {
    let user = match state
        .authenticator
        .authenticate(peer, request.headers())
        .await
    {
        Ok(user) => user,
        Err(error) => {
            tracing::debug!(%error, path = request.uri().path(), "unauthenticated kubelet API request");
            return reply::text(StatusCode::UNAUTHORIZED, "Unauthorized");
        }
    };
    if let Err(refused) = state
        .authorizer
        .authorize(
            &user,
            request.method(),
            request.uri().path(),
            &state.node_name,
        )
        .await
    {
        let status = match refused {
            super::authz::Refused::Forbidden { .. } => StatusCode::FORBIDDEN,
            super::authz::Refused::Failed { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        };
        return reply::text(status, refused.to_string());
    }
    route(state, request).await
}

async fn route(state: &ApiState, request: Request<Incoming>) -> Reply {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or("");
    if let Some(reply) = healthz::answer(path, query, state.problems.as_ref()) {
        return reply;
    }
    match (request.method(), path) {
        (&Method::GET, "/pods" | "/pods/") => return pods::bound_pods(state.volumes.as_ref()),
        (&Method::GET, "/runningpods" | "/runningpods/") => return pods::running_pods(&state.pods),
        (&Method::GET, "/configz") => return pods::configz(&state.config),
        (&Method::GET, "/metrics") => return kubelet_metrics::serve(state).await,
        (&Method::GET, "/metrics/resource") => return stats::resource_metrics::serve(state).await,
        (&Method::GET, "/metrics/cadvisor") => return cadvisor::serve(state).await,
        (&Method::GET, "/metrics/probes") => {
            return probe_metrics::serve(state.probes.as_ref(), &state.pods.snapshot());
        }
        (&Method::GET | &Method::POST, "/stats/summary") => {
            return stats::handler::summary(state, query).await;
        }
        _ => {}
    }
    for (prefix, kind) in [
        ("/exec/", streaming::Kind::Exec),
        ("/attach/", streaming::Kind::Attach),
        ("/portForward/", streaming::Kind::PortForward),
    ] {
        if let Some(rest) = path.strip_prefix(prefix) {
            if !matches!(*request.method(), Method::GET | Method::POST) {
                return reply::text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
            }
            let Some(segments) = segments(rest) else {
                return reply::not_found();
            };
            let runtime = state.runtime.as_ref();
            return streaming::serve(kind, &segments, &state.pods, runtime, request).await;
        }
    }
    if let Some(rest) = path.strip_prefix("/run/") {
        if request.method() != Method::POST {
            return reply::text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
        }
        let Some(segments) = segments(rest) else {
            return reply::not_found();
        };
        return run::serve(&segments, query, &state.pods, state.runtime.as_ref()).await;
    }
    if let Some(rest) = path.strip_prefix("/logs/") {
        if request.method() != Method::GET {
            return reply::text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
        }
        let root = state.host.host_path(Path::new("/var/log"));
        let gzip = request
            .headers()
            .get(http::header::ACCEPT_ENCODING)
            .is_some_and(|value| value == "gzip");
        return node_logs::serve(root, rest.to_owned(), query, state.system_log_query, gzip).await;
    }
    if let Some(rest) = path.strip_prefix("/containerLogs/") {
        if request.method() != Method::GET {
            return reply::text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
        }
        return match segments(rest) {
            Some(segments) => logs::container_logs(&state.pods, &segments, query),
            None => reply::not_found(),
        };
    }
    reply::not_found()
}

/// The `/`-separated segments of `rest`, percent-decoded; `None` when one is not UTF-8.
pub(super) fn segments(rest: &str) -> Option<Vec<String>> {
    rest.split('/')
        .map(|segment| {
            percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .ok()
                .map(|decoded| decoded.into_owned())
        })
        .collect()
}
