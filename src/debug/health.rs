//! `GET /healthz`: "ok" while every actor runs or is restarting normally; 503 with the reasons
//! when an actor escalated or has been down longer than a healthy restart takes.

use http::StatusCode;
use serde_json::json;

use super::{
    error::DebugError,
    reply::{self, Reply},
    routes::Call,
};

pub async fn healthz(call: Call) -> Result<Reply, DebugError> {
    let problems: Vec<String> = call
        .context
        .nodes
        .all()
        .iter()
        .flat_map(|handle| {
            handle
                .problems()
                .into_iter()
                .map(move |problem| format!("node {:?}: {problem}", handle.node()))
        })
        .collect();
    Ok(if problems.is_empty() {
        reply::with_type(StatusCode::OK, "text/plain; charset=utf-8", "ok")
    } else {
        reply::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "status": "unhealthy", "problems": problems }),
        )
    })
}
