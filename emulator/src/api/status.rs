//! API errors and the `Status` bodies kube-apiserver writes for them.
//!
//! Each constructor mirrors one of apimachinery's `errors.NewXxx` functions, so the reason,
//! message, code and details match the real server byte for byte where clients look at them.
//! This module only builds values; the HTTP layer decides how to send them.

use serde_json::{Map, Value, json};

pub use nodepulse_validation::FieldError;

use super::resource::ApiResource;

/// A failed API call, convertible to a `metav1.Status` body.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(
        code: u16,
        reason: &'static str,
        message: String,
        details: Option<Value>,
    ) -> Self {
        ApiError {
            code,
            reason,
            message,
            details,
        }
    }

    /// `errors.NewNotFound`: `nodes "n1" not found`.
    pub fn not_found(resource: &ApiResource, name: &str) -> Self {
        let message = format!("{} {name:?} not found", resource.qualified_resource());
        Self::new(
            404,
            "NotFound",
            message,
            Some(details(name, resource.group, resource.plural)),
        )
    }

    /// NotFound for a namespace that a namespaced request names (NamespaceLifecycle admission).
    pub fn namespace_not_found(namespace: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("namespaces {namespace:?} not found"),
            Some(details(namespace, "", "namespaces")),
        )
    }

    /// `errors.NewAlreadyExists`: `nodes "n1" already exists`.
    pub fn already_exists(resource: &ApiResource, name: &str) -> Self {
        let message = format!("{} {name:?} already exists", resource.qualified_resource());
        Self::new(
            409,
            "AlreadyExists",
            message,
            Some(details(name, resource.group, resource.plural)),
        )
    }

    /// `errors.NewConflict` on a resource: `Operation cannot be fulfilled on nodes "n1": <cause>`.
    pub fn conflict(resource: &ApiResource, name: &str, cause: &str) -> Self {
        Self::conflict_named(resource.group, resource.plural, name, cause)
    }

    /// The usual optimistic-concurrency conflict of a stale `resourceVersion`.
    pub fn stale(resource: &ApiResource, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// The Conflict a failed storage precondition (the UID a PUT body carries) becomes:
    /// etcd3's `StorageError` text, storage key included, inside `errors.NewConflict`.
    pub fn uid_precondition_failed(
        resource: &ApiResource,
        name: &str,
        storage_key: &str,
        wanted: &str,
        actual: &str,
    ) -> Self {
        let cause = format!(
            "StorageError: invalid object, Code: 4, Key: {storage_key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"
        );
        Self::conflict(resource, name, &cause)
    }

    /// `errors.NewConflict` where the "resource" is another name; kube-apiserver's delete
    /// preconditions pass the Kind here (`Operation cannot be fulfilled on Pod "p": ...`).
    pub fn conflict_named(group: &str, resource: &str, name: &str, cause: &str) -> Self {
        let qualified = super::resource::qualify(resource, group);
        let message = format!("Operation cannot be fulfilled on {qualified} {name:?}: {cause}");
        Self::new(
            409,
            "Conflict",
            message,
            Some(details(name, group, resource)),
        )
    }

    /// `errors.NewInvalid`: `Node "n1" is invalid: metadata.uid: Invalid value: ...`.
    pub fn invalid(resource: &ApiResource, name: &str, errors: &[FieldError]) -> Self {
        Self::invalid_named(
            &resource.qualified_kind(),
            resource.group,
            resource.kind,
            name,
            errors,
        )
    }

    /// An update without `metadata.resourceVersion` to a kind that does not allow unconditional
    /// updates. The generic registry store passes the *resource* as the kind here
    /// (`leases.coordination.k8s.io "l" is invalid: ...`, `details.kind: leases`).
    pub fn resource_version_required(resource: &ApiResource, name: &str) -> Self {
        let error = FieldError::invalid_shown(
            "metadata.resourceVersion",
            "0x0",
            "must be specified for an update",
        );
        let qualified = resource.qualified_resource();
        Self::invalid_named(&qualified, resource.group, resource.plural, name, &[error])
    }

    /// A patched object that does not decode into its type: `NewInvalid` with an empty
    /// `GroupKind` and name, so the message starts ` "" is invalid: patch: ...`.
    pub fn invalid_patch(error: &FieldError) -> Self {
        Self::invalid_named("", "", "", "", std::slice::from_ref(error))
    }

    /// `errors.NewInvalid` for the `GroupKind` (`group`, `kind`), printed as `qualified`.
    pub(crate) fn invalid_named(
        qualified: &str,
        group: &str,
        kind: &str,
        name: &str,
        errors: &[FieldError],
    ) -> Self {
        let rendered: Vec<String> = errors.iter().map(FieldError::render).collect();
        let summary = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let message = format!("{qualified} {name:?} is invalid: {summary}");
        let mut d = details(name, group, kind);
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
            .collect();
        if let Value::Object(map) = &mut d {
            map.insert("causes".into(), Value::Array(causes));
        }
        Self::new(422, "Invalid", message, Some(d))
    }

    /// `errors.NewBadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    /// `errors.NewForbidden`: `nodes "n2" is forbidden: <cause>`.
    pub fn forbidden(resource: &ApiResource, name: &str, cause: &str) -> Self {
        let qualified = resource.qualified_resource();
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {cause}")
        } else {
            format!("{qualified} {name:?} is forbidden: {cause}")
        };
        Self::new(
            403,
            "Forbidden",
            message,
            Some(details(name, resource.group, resource.plural)),
        )
    }

    /// The authentication failure body: `Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized".into(), None)
    }

    /// `errors.NewMethodNotSupported`.
    pub fn method_not_supported(resource: &ApiResource, action: &str) -> Self {
        let message = format!(
            "{action} is not supported on resources of kind {:?}",
            resource.qualified_resource()
        );
        Self::new(
            405,
            "MethodNotAllowed",
            message,
            Some(details("", resource.group, resource.plural)),
        )
    }

    /// `errors.NewResourceExpired` (410 with reason `Expired`), used for too-old watch versions.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into(), None)
    }

    /// The 422 kube-apiserver answers for invalid watch list options.
    pub fn invalid_watch(message: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!(
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: {message}"
            ),
            None,
        )
    }

    /// The generic 404 for a path that names no served resource.
    pub fn no_such_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
            Some(json!({})),
        )
    }

    /// `errors.NewUnsupportedMediaType` for a PATCH with an unknown content type.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
            None,
        )
    }

    /// What kube-apiserver answers for an error no layer classified: 500 with an empty reason.
    pub fn unclassified(message: impl Into<String>) -> Self {
        Self::new(500, "", message.into(), None)
    }

    /// `errors.NewInternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        let cause = message.into();
        let details = json!({"causes": [{"message": cause}]});
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {cause}"),
            Some(details),
        )
    }

    /// An error for an arbitrary HTTP code, as fault injection asks for; reason and message follow
    /// `errors.NewGenericServerResponse` for that code. `retry_after` seconds go into
    /// `details.retryAfterSeconds` (and so the `Retry-After` header) when positive; unset, 429,
    /// 503 and 504 carry 1 (as the API server's throttling, shutdown and timeout answers carry
    /// one) and others none (an `InternalError` from kube-apiserver never has one).
    pub fn for_code(code: u16, message: Option<&str>, retry_after: Option<u64>) -> Self {
        let (reason, default_message) = match code {
            400 => (
                "BadRequest",
                "the server rejected our request for an unknown reason",
            ),
            401 => (
                "Unauthorized",
                "the server has asked for the client to provide credentials",
            ),
            403 => (
                "Forbidden",
                "the server does not allow access to the requested resource",
            ),
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            409 => ("Conflict", "the server reported a conflict"),
            410 => ("Gone", "the server has asked for the client to retry"),
            422 => (
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            500 => (
                "InternalError",
                "an error on the server (\"unknown\") has prevented the request from succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still be processing the request",
            ),
            _ => (
                "Unknown",
                "an error on the server has prevented the request from succeeding",
            ),
        };
        let retry_after = retry_after.unwrap_or(if matches!(code, 429 | 503 | 504) {
            1
        } else {
            0
        });
        let details = (retry_after > 0).then(|| json!({"retryAfterSeconds": retry_after}));
        Self::new(
            code,
            reason,
            message.unwrap_or(default_message).to_string(),
            details,
        )
    }

    /// The `metav1.Status` body for this error.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), "Status".into());
        status.insert("apiVersion".into(), "v1".into());
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), "Failure".into());
        status.insert("message".into(), self.message.clone().into());
        if !self.reason.is_empty() {
            status.insert("reason".into(), self.reason.into());
        }
        if let Some(details) = &self.details {
            status.insert("details".into(), details.clone());
        }
        status.insert("code".into(), self.code.into());
        Value::Object(status)
    }

    /// Seconds a client should wait before retrying, when the error carries one.
    pub fn retry_after(&self) -> Option<u64> {
        self.details.as_ref()?.get("retryAfterSeconds")?.as_u64()
    }
}

/// `StatusDetails` with empty fields omitted, as the Go encoder does.
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut map = Map::new();
    if !name.is_empty() {
        map.insert("name".into(), name.into());
    }
    if !group.is_empty() {
        map.insert("group".into(), group.into());
    }
    if !kind.is_empty() {
        map.insert("kind".into(), kind.into());
    }
    Value::Object(map)
}

/// The `Status` a successful DELETE returns for resources that do not return the deleted object.
pub fn delete_success(resource: &ApiResource, name: &str, uid: &str) -> Value {
    let mut d = details(name, resource.group, resource.plural);
    if let Value::Object(map) = &mut d {
        map.insert("uid".into(), uid.into());
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resource::{LEASES, NODES};

    #[test]
    fn not_found_matches_kube_apiserver() {
        let status = ApiError::not_found(&LEASES, "n1").to_status();
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "leases.coordination.k8s.io \"n1\" not found", "reason": "NotFound",
                   "details": {"name": "n1", "group": "coordination.k8s.io", "kind": "leases"}, "code": 404})
        );
    }

    #[test]
    fn invalid_lists_causes_and_names_the_kind() {
        let err = ApiError::invalid(
            &NODES,
            "n1",
            &[FieldError::invalid(
                "metadata.uid",
                &json!("abc"),
                "field is immutable",
            )],
        );
        assert_eq!(
            err.message,
            "Node \"n1\" is invalid: metadata.uid: Invalid value: \"abc\": field is immutable"
        );
        assert_eq!(
            err.details,
            Some(
                json!({"name": "n1", "kind": "Node", "causes": [{"reason": "FieldValueInvalid",
                "message": "Invalid value: \"abc\": field is immutable", "field": "metadata.uid"}]})
            )
        );
    }

    #[test]
    fn a_missing_resource_version_is_invalid_on_the_resource() {
        let err = ApiError::resource_version_required(&LEASES, "l1");
        assert_eq!(
            err.to_status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "leases.coordination.k8s.io \"l1\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                "reason": "Invalid",
                "details": {"name": "l1", "group": "coordination.k8s.io", "kind": "leases", "causes": [
                    {"reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
                     "field": "metadata.resourceVersion"}]},
                "code": 422})
        );
    }

    #[test]
    fn stale_conflict_message_is_the_optimistic_concurrency_one() {
        let err = ApiError::stale(&NODES, "n1");
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
        );
    }
}
