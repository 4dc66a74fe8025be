//! `GET /healthz`: "ok" while every actor runs or is restarting normally; 503 with the reasons
//! when an actor escalated or has been down longer than a healthy restart takes.

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::DebugContext;

pub async fn healthz(context: web::Data<DebugContext>) -> HttpResponse {
    let problems: Vec<String> = context
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
    if problems.is_empty() {
        HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body("ok")
    } else {
        HttpResponse::ServiceUnavailable()
            .json(json!({ "status": "unhealthy", "problems": problems }))
    }
}
