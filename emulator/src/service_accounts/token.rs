//! `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`, as kube-apiserver's token REST
//! answers it: `expirationSeconds` defaulted to 3600 and at least 600, audiences defaulted to
//! the API server's, a bound Pod that must exist, run as this ServiceAccount and carry the UID
//! given; the answer holds a JWT-shaped token (unsigned, never verified) and its expiry.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use serde_json::{Value, json};

use crate::api::resource::{PODS, SERVICE_ACCOUNTS};
use crate::api::{ApiError, FieldError, StoredKind};
use crate::store::{ObjectKey, Store};
use crate::time::format_time;

/// The issuer, and the audience of tokens that name none (kube-apiserver's `--api-audiences`
/// default to its issuer).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;

/// Answers a TokenRequest for ServiceAccount `name` in `namespace` (201 body).
pub fn create_token(
    store: &Store,
    namespace: &str,
    name: &str,
    body: &[u8],
    now: SystemTime,
) -> Result<Value, ApiError> {
    let request: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't decode TokenRequest: {e}")))?;
    if serde_json::from_value::<k8s_openapi::api::authentication::v1::TokenRequest>(request.clone())
        .is_err()
    {
        return Err(ApiError::bad_request(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest",
        ));
    }
    let account = store
        .get(StoredKind::ServiceAccount, &ObjectKey::new(namespace, name))
        .ok_or_else(|| ApiError::not_found(&SERVICE_ACCOUNTS, name))?;
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION);
    let invalid = |detail: &str| {
        ApiError::invalid_named(
            "TokenRequest.authentication.k8s.io",
            "authentication.k8s.io",
            "TokenRequest",
            name,
            &[FieldError::invalid(
                "spec.expirationSeconds",
                &json!(expiration),
                detail,
            )],
        )
    };
    if expiration < MIN_EXPIRATION {
        return Err(invalid("may not specify a duration less than 10 minutes"));
    }
    if expiration > MAX_EXPIRATION {
        return Err(invalid(
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => list.clone(),
        _ => vec![json!(ISSUER)],
    };
    let bound = spec.get("boundObjectRef").filter(|r| !r.is_null());
    let pod = match bound {
        None => None,
        Some(reference) => Some(bound_pod(store, namespace, name, reference)?),
    };
    let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let expires = now + Duration::from_secs(u64::try_from(expiration).unwrap_or(0));
    let mut kubernetes = json!({
        "namespace": namespace,
        "serviceaccount": {"name": name, "uid": account.pointer("/metadata/uid")},
    });
    if let Some(pod) = &pod {
        kubernetes["pod"] =
            json!({"name": pod.pointer("/metadata/name"), "uid": pod.pointer("/metadata/uid")});
    }
    let claims = json!({
        "aud": audiences,
        "exp": issued + u64::try_from(expiration).unwrap_or(0),
        "iat": issued,
        "nbf": issued,
        "iss": ISSUER,
        "jti": format!("{:032x}", rand::random::<u128>()),
        "kubernetes.io": kubernetes,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    });
    let mut answer_spec = spec.clone();
    answer_spec["audiences"] = Value::Array(audiences);
    answer_spec["expirationSeconds"] = json!(expiration);
    if answer_spec.get("boundObjectRef").is_none() {
        answer_spec["boundObjectRef"] = Value::Null;
    }
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": answer_spec,
        "status": {"token": jwt(&claims), "expirationTimestamp": format_time(expires)},
    }))
}

/// The Pod a token is bound to, checked as kube-apiserver checks it.
fn bound_pod(
    store: &Store,
    namespace: &str,
    account: &str,
    reference: &Value,
) -> Result<std::sync::Arc<Value>, ApiError> {
    let text = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if !(api_version == "v1" && kind == "Pod") {
        let group_kind = match api_version.split_once('/') {
            Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
            None => format!("/{api_version}, Kind={kind}"),
        };
        return Err(ApiError::bad_request(format!(
            "cannot bind token for object of type {group_kind}"
        )));
    }
    let pod_name = text("name");
    let pod = store
        .get(StoredKind::Pod, &ObjectKey::new(namespace, pod_name))
        .ok_or_else(|| ApiError::not_found(&PODS, pod_name))?;
    let runs_as = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(super::DEFAULT_SERVICE_ACCOUNT);
    if runs_as != account {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
        )));
    }
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let wanted = text("uid");
    if !wanted.is_empty() && wanted != uid {
        return Err(ApiError::conflict_named(
            "",
            "Pod",
            pod_name,
            &format!(
                "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(pod)
}

/// `header.claims.signature`, each base64url without padding. The signature is random: no
/// client of the emulator verifies it.
fn jwt(claims: &Value) -> String {
    let header = json!({"alg": "RS256", "kid": "nodepulse-emulator"});
    let signature: Vec<u8> = (0..64).map(|_| rand::random::<u8>()).collect();
    [
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes()),
        base64url(&signature),
    ]
    .join(".")
}

fn base64url(bytes: &[u8]) -> String {
    let standard = serde_json::to_value(ByteString(bytes.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    standard
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}
