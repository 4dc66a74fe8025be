//! Discovery and health endpoints, enough for kubectl and kube-rs:
//! `/version`, `/healthz`, `/readyz`, `/livez`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`,
//! `/apis/{group}/{version}`. Legacy (non-aggregated) discovery; clients that ask for the
//! aggregated form fall back to it.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{error_response, json_response};
use crate::api::resource::{ALL, GROUPS};
use crate::api::{ApiError, ApiResource};

/// The Kubernetes version the emulator claims to be (the API it models).
pub const KUBERNETES_VERSION: &str = "v1.36.0";

/// Registers the discovery and health routes.
pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/version", web::get().to(version))
        .route("/healthz", web::get().to(ok))
        .route("/readyz", web::get().to(ok))
        .route("/livez", web::get().to(ok))
        .route("/api", web::get().to(api_versions))
        .route("/api/v1", web::get().to(core_resources))
        .route("/apis", web::get().to(group_list))
        .route("/apis/{group}", web::get().to(group))
        .route("/apis/{group}/{version}", web::get().to(group_resources));
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("ok")
}

async fn version() -> HttpResponse {
    json_response(
        StatusCode::OK,
        &json!({"major": "1", "minor": "36", "gitVersion": KUBERNETES_VERSION, "gitCommit": "nodepulse-emulator",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0",
            "compiler": "gc", "platform": "linux/amd64"}),
    )
}

async fn api_versions(req: HttpRequest) -> HttpResponse {
    let address = req.connection_info().host().to_string();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}),
    )
}

fn group_json(name: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
    json!({"name": name, "versions": [gv.clone()], "preferredVersion": gv})
}

async fn group_list() -> HttpResponse {
    let groups: Vec<Value> = GROUPS
        .iter()
        .map(|(name, version)| group_json(name, version))
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

async fn group(path: web::Path<String>) -> HttpResponse {
    let name = path.into_inner();
    match GROUPS.iter().find(|(g, _)| *g == name) {
        Some((g, v)) => {
            let mut body = group_json(g, v);
            body["kind"] = "APIGroup".into();
            body["apiVersion"] = "v1".into();
            json_response(StatusCode::OK, &body)
        }
        None => error_response(&ApiError::no_such_path()),
    }
}

async fn core_resources() -> HttpResponse {
    json_response(StatusCode::OK, &resource_list("", "v1"))
}

async fn group_resources(path: web::Path<(String, String)>) -> HttpResponse {
    let (group, version) = path.into_inner();
    if !GROUPS.iter().any(|(g, v)| *g == group && *v == version) {
        return error_response(&ApiError::no_such_path());
    }
    json_response(StatusCode::OK, &resource_list(&group, &version))
}

/// `APIResourceList` for one group version, with `/status` subresources.
fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in ALL
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(resource_json(r));
        if r.has_status {
            resources.push(json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
        if r.stored == crate::api::StoredKind::Pod {
            resources.push(
                json!({"name": "pods/ephemeralcontainers", "singularName": "", "namespaced": true,
                "kind": "Pod", "verbs": ["get", "patch", "update"]}),
            );
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

fn resource_json(r: &ApiResource) -> Value {
    let mut body = json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs()});
    if !r.short_names.is_empty() {
        body["shortNames"] = json!(r.short_names);
    }
    body
}
