//! `GET /debug/kubelet-api`: what the kubelet API has open now — TLS connections, and streams
//! by kind (container logs being read, exec, attach and port-forward relays) — from the
//! API's own counters. Process-wide: every node of the process shares the one API.

use http::StatusCode;

use super::{
    error::DebugError,
    reply::{self, Reply},
    routes::Call,
};
use crate::kubelet_server::metrics::KUBELET_API_METRICS;

pub async fn in_flight(_call: Call) -> Result<Reply, DebugError> {
    Ok(reply::json(
        StatusCode::OK,
        &KUBELET_API_METRICS.in_flight(),
    ))
}
