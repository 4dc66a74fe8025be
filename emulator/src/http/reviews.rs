//! `POST /apis/authentication.k8s.io/v1/tokenreviews` and
//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, as kube-apiserver's REST
//! handlers answer them (`pkg/registry/authentication/tokenreview`,
//! `pkg/registry/authorization/subjectaccessreview`): a TokenReview is judged by the emulator's
//! own token authenticator; a SubjectAccessReview by its authorizer, which has no RBAC and so
//! allows every request it is asked about (NodeRestriction guards object writes, which no
//! review describes). Both are created (201), never stored.

use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::auth::{Identity, authenticate_request};
use super::{AppState, error_response, json_response};
use crate::api::{ApiError, FieldError, Verb};
use crate::request_log::RequestRecord;
use crate::service_accounts::ISSUER;

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            web::post().to(token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            web::post().to(access_review),
        );
}

async fn token_review(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<AppState>,
) -> HttpResponse {
    reviewed(
        &req,
        &state,
        "authentication.k8s.io",
        "tokenreviews",
        || {
            let mut review = decode(&body, "TokenReview", "authentication.k8s.io/v1")?;
            let token = review
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or("");
            if token.is_empty() {
                return Err(ApiError::bad_request(
                    "token is required for TokenReview in authentication",
                ));
            }
            let status = match state.auth.tokens.get(token) {
                Some(user) => json!({
                    "authenticated": true,
                    "user": {"username": user.name, "groups": user.groups},
                    "audiences": [ISSUER],
                }),
                None => json!({"user": {}, "error": "invalid bearer token"}),
            };
            review["status"] = status;
            Ok(review)
        },
    )
}

async fn access_review(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<AppState>,
) -> HttpResponse {
    reviewed(
        &req,
        &state,
        "authorization.k8s.io",
        "subjectaccessreviews",
        || {
            let mut review = decode(&body, "SubjectAccessReview", "authorization.k8s.io/v1")?;
            let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
            let present = |field: &str| spec.get(field).is_some_and(|value| !value.is_null());
            let mut errors = Vec::new();
            if present("resourceAttributes") && present("nonResourceAttributes") {
                errors.push(FieldError::invalid_shown(
                    "spec.nonResourceAttributes",
                    "{}",
                    "cannot be specified in combination with resourceAttributes",
                ));
            }
            if !present("resourceAttributes") && !present("nonResourceAttributes") {
                errors.push(FieldError::invalid_shown(
                    "spec.resourceAttributes",
                    "null",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ));
            }
            let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
            let groups = spec
                .get("groups")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if user.is_empty() && groups == 0 {
                errors.push(FieldError::invalid(
                    "spec.user",
                    &json!(user),
                    "at least one of user or group must be specified",
                ));
            }
            if !errors.is_empty() {
                // kube-apiserver names the kind of the decoded object, whose `kind` decoding
                // cleared: the message reads `.authorization.k8s.io "" is invalid`.
                return Err(ApiError::invalid_named(
                    ".authorization.k8s.io",
                    "authorization.k8s.io",
                    "",
                    "",
                    &errors,
                ));
            }
            review["status"] = json!({"allowed": true});
            Ok(review)
        },
    )
}

/// Authenticates the caller, records the request and answers `review()` with 201.
fn reviewed(
    req: &HttpRequest,
    state: &AppState,
    group: &str,
    resource: &str,
    review: impl FnOnce() -> Result<Value, ApiError>,
) -> HttpResponse {
    let identity = match authenticate_request(req, state) {
        Ok(identity) => identity,
        Err(error) => return error_response(&error),
    };
    let answer = review();
    let response = match &answer {
        Ok(body) => json_response(StatusCode::CREATED, body),
        Err(error) => error_response(error),
    };
    state.requests.record(RequestRecord {
        user: match identity {
            Identity::User(user) => user.name,
            Identity::Anonymous => "system:anonymous".to_owned(),
        },
        verb: Verb::Create,
        group: group.to_owned(),
        resource: resource.to_owned(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        field_selector: String::new(),
        code: response.status().as_u16(),
        received: Instant::now(),
    });
    response
}

/// The request body as the review it must be, with the metadata kube-apiserver echoes.
fn decode(body: &[u8], kind: &str, api_version: &str) -> Result<Value, ApiError> {
    let mut review: Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("couldn't decode {kind}: {error}")))?;
    if !review.is_object() {
        return Err(ApiError::bad_request(format!("couldn't decode {kind}")));
    }
    review["kind"] = json!(kind);
    review["apiVersion"] = json!(api_version);
    review["metadata"] = json!({"creationTimestamp": null});
    Ok(review)
}
