//! The resource API entry point: parse the target and verb, authenticate, apply injected faults,
//! then hand over to the verb's handler. Logs one line per request at debug level and records
//! every authenticated request in the request log.

use std::time::{Instant, SystemTime};

use actix_web::http::header::{ACCEPT, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};

use super::auth::{Identity, authenticate};
use super::handlers::{self, Request};
use super::query::Query;
use super::table::wants_table;
use super::{AppState, error_response, watch};
use crate::api::target::TargetError;
use crate::api::{ApiError, Target, Verb};
use crate::faults::{FaultAction, RequestFacts};
use crate::request_log::RequestRecord;

/// Serves any `/api/...` or `/apis/...` resource request.
pub async fn dispatch(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<AppState>,
) -> HttpResponse {
    let mut record = None;
    let result = serve(&req, &body, &state, &mut record).await;
    let response = result.unwrap_or_else(|e| error_response(&e));
    if let Some(mut record) = record {
        record.code = response.status().as_u16();
        state.requests.record(record);
    }
    tracing::debug!(method = %req.method(), path = req.path(), status = response.status().as_u16(), "api request");
    response
}

/// Serves one request; `record` is filled once the caller is known, so the request log holds
/// every authenticated request whatever its outcome.
async fn serve(
    req: &HttpRequest,
    body: &[u8],
    state: &AppState,
    record: &mut Option<RequestRecord>,
) -> Result<HttpResponse, ApiError> {
    let target = match Target::parse(req.path()) {
        Ok(target) => target,
        Err(TargetError::NotAnApiPath) => {
            return Ok(HttpResponse::NotFound()
                .content_type("text/plain; charset=utf-8")
                .body("404 page not found\n"));
        }
        Err(TargetError::Unknown) => return Err(ApiError::no_such_path()),
    };
    let query = Query::parse(req.query_string())?;
    let verb = target
        .verb(req.method().as_str(), query.watch())
        .ok_or_else(|| {
            ApiError::method_not_supported(target.resource, &req.method().as_str().to_lowercase())
        })?;
    let needs_namespace = target.resource.namespaced && !matches!(verb, Verb::List | Verb::Watch);
    if needs_namespace && target.namespace.is_none() {
        return Err(ApiError::no_such_path());
    }
    let identity = authenticate(
        &state.auth,
        req.headers(),
        &state.store,
        req.conn_data::<super::auth::CertificateUser>(),
    )?;
    *record = Some(RequestRecord {
        user: match &identity {
            Identity::User(user) => user.name.clone(),
            Identity::Anonymous => "system:anonymous".to_owned(),
        },
        verb,
        group: target.resource.group.to_owned(),
        resource: target.resource.plural.to_owned(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace: target.namespace_or_empty().to_owned(),
        name: target.name.clone().unwrap_or_default(),
        field_selector: query.get("fieldSelector").unwrap_or("").to_owned(),
        code: 0,
        received: Instant::now(),
    });

    let decision = state.faults.decide(&RequestFacts {
        verb,
        resource: target.resource.plural,
        subresource: target.subresource.as_deref().unwrap_or(""),
        namespace: target.namespace_or_empty(),
        name: target.name.as_deref().unwrap_or(""),
    });
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    match decision.fault {
        None => {}
        Some(FaultAction::Error { code, message }) => {
            return Err(ApiError::for_code(
                code,
                message.as_deref(),
                decision.retry_after_seconds,
            ));
        }
        Some(FaultAction::Conflict) => {
            return Err(ApiError::stale(
                target.resource,
                target.name.as_deref().unwrap_or(""),
            ));
        }
        Some(FaultAction::Hang) => {
            let mut shutdown = state.shutdown.clone();
            // Answer nothing until the emulator shuts down (then drop the connection).
            let _ = shutdown
                .wait_for(|ending| *ending != super::Ending::Serving)
                .await;
            return Ok(dropped_connection());
        }
        Some(FaultAction::DropConnection) => return Ok(dropped_connection()),
        Some(FaultAction::Latency { .. }) => {}
    }

    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let request = Request {
        state,
        target,
        verb,
        query,
        body,
        content_type,
        identity,
        table: wants_table(
            req.headers()
                .get(ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
        ) && matches!(verb, Verb::Get | Verb::List | Verb::Watch),
    };
    let now = SystemTime::now();
    match verb {
        Verb::Get => handlers::get(&request),
        Verb::List => handlers::list(&request),
        Verb::Watch => watch::serve(&request),
        Verb::Create => handlers::create(&request, now),
        Verb::Update => handlers::update(&request, now),
        Verb::Patch => handlers::patch(&request),
        Verb::Delete => handlers::delete(&request, now),
        Verb::Deletecollection => handlers::delete_collection(&request, now),
    }
}

/// A response whose body breaks off: a declared length of 1 KiB, a few bytes, then an error,
/// which makes actix-web close the connection mid-response.
fn dropped_connection() -> HttpResponse {
    let chunks: Vec<Result<web::Bytes, std::io::Error>> = vec![
        Ok(web::Bytes::from_static(b"{\"kind\":\"Sta")),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "fault injection: connection dropped",
        )),
    ];
    HttpResponse::Ok()
        .content_type("application/json")
        .streaming(futures::stream::iter(chunks))
}
