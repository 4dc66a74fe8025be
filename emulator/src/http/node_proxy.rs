//! `/api/v1/nodes/{name}[:{port}]/proxy/{path}`, as kube-apiserver's node proxy serves it for
//! the kubelet port: the request (method, path, query, body) relayed to the node's kubelet API
//! with the emulator's client certificate (`kubelet_client`), and the kubelet's answer relayed
//! back as it is (status, content type, body streamed). Other ports are not proxied here.

use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use super::auth::{Identity, authenticate_request};
use super::{AppState, error_response};
use crate::api::resource::NODES;
use crate::api::{ApiError, Verb};
use crate::request_log::RequestRecord;
use crate::store::ObjectKey;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/api/v1/nodes/{name}/proxy", web::route().to(node_proxy))
        .route(
            "/api/v1/nodes/{name}/proxy/{path:.*}",
            web::route().to(node_proxy),
        );
}

async fn node_proxy(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<AppState>,
) -> HttpResponse {
    let name = req.match_info().get("name").unwrap_or_default().to_owned();
    let path = req.match_info().get("path").unwrap_or_default().to_owned();
    let identity = match authenticate_request(&req, &state) {
        Ok(identity) => identity,
        Err(error) => return error_response(&error),
    };
    let response = match relay(&req, &state, &name, &path, body).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    let verb = match *req.method() {
        actix_web::http::Method::POST => Verb::Create,
        actix_web::http::Method::PUT => Verb::Update,
        actix_web::http::Method::PATCH => Verb::Patch,
        actix_web::http::Method::DELETE => Verb::Delete,
        _ => Verb::Get,
    };
    state.requests.record(RequestRecord {
        user: match identity {
            Identity::User(user) => user.name,
            Identity::Anonymous => "system:anonymous".to_owned(),
        },
        verb,
        group: String::new(),
        resource: "nodes".to_owned(),
        subresource: "proxy".to_owned(),
        namespace: String::new(),
        name,
        field_selector: String::new(),
        code: response.status().as_u16(),
        received: Instant::now(),
    });
    response
}

async fn relay(
    req: &HttpRequest,
    state: &AppState,
    name: &str,
    path: &str,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (node_name, port) = match name.split_once(':') {
        Some((node, port)) => (node, Some(port)),
        None => (name, None),
    };
    let node = state
        .store
        .get(NODES.stored, &ObjectKey::new("", node_name))
        .ok_or_else(|| ApiError::not_found(&NODES, node_name))?;
    let endpoint = state
        .kubelet_addresses
        .endpoint(&node)
        .map_err(ApiError::internal)?;
    let kubelet_port = endpoint.port;
    if let Some(port) = port.filter(|port| *port != kubelet_port.to_string()) {
        return Err(ApiError::bad_request(format!(
            "the emulator proxies only to the kubelet port {kubelet_port}, not {port}"
        )));
    }
    let query = req.query_string();
    let target = format!("/{path}{}{query}", if query.is_empty() { "" } else { "?" });
    let method = http::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    let answer = state
        .kubelet
        .request(method, &endpoint, &target, body)
        .await
        .map_err(|error| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("error trying to reach service: {error}"),
                None,
            )
        })?;
    let status =
        StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = answer
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let frames = http_body_util::BodyStream::new(answer.into_body()).filter_map(|frame| async {
        match frame {
            Ok(frame) => frame.into_data().ok().map(Ok::<_, std::io::Error>),
            Err(error) => Some(Err(std::io::Error::other(error))),
        }
    });
    let mut response = HttpResponse::build(status);
    if let Some(content_type) = content_type {
        response.content_type(content_type);
    }
    Ok(response.streaming(frames))
}
