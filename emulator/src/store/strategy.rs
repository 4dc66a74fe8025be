//! Per-kind create and update rules: what kube-apiserver's registry strategies and the admission
//! plugins nodepulse depends on do to an object before it is stored.
//!
//! Pure functions over JSON objects; `now` and the new UID are arguments. The store calls them
//! under its lock and never lets a request bypass them.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use nodepulse_validation::names::{
    DNS1123_LABEL_MESSAGE, DNS1123_SUBDOMAIN_MESSAGE, is_label, is_subdomain,
};

use crate::api::{ApiResource, FieldError, StoredKind};
use crate::time::format_time;

/// The taint the `TaintNodesByCondition` admission plugin puts on every new Node.
pub const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";

/// Fills system fields and kind defaults on a new object (`BeforeCreate` + `PrepareForCreate` +
/// defaulting + mutating admission).
pub fn prepare_for_create(resource: &ApiResource, object: &mut Value, uid: &str, now: SystemTime) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let canonical = ApiResource::canonical(resource.stored);
    map.insert("kind".into(), canonical.kind.into());
    map.insert("apiVersion".into(), canonical.api_version().into());
    let meta = object_entry(map, "metadata");
    meta.insert("uid".into(), uid.into());
    meta.insert("creationTimestamp".into(), format_time(now).into());
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("generation");
    match resource.stored {
        StoredKind::Node => add_not_ready_taint(map),
        StoredKind::Pod => super::pod_defaults::prepare_pod(map),
        StoredKind::Namespace => prepare_namespace(map),
        StoredKind::Secret => super::config_data::prepare_secret(map),
        StoredKind::Service => super::services::prepare(map),
        StoredKind::Lease
        | StoredKind::Event
        | StoredKind::ConfigMap
        | StoredKind::ServiceAccount
        | StoredKind::RuntimeClass
        | StoredKind::CertificateSigningRequest => {}
        storage => super::storage_kinds::prepare(storage, map),
    }
    crate::api::typed::round_trip(resource.stored, object);
    if let Some(map) = object.as_object_mut() {
        super::go_fields::fill(resource.stored, map);
    }
}

/// Carries system fields over from `old` and applies the status-subresource rule: the main
/// resource never changes `status`, `/status` never changes `spec` (`BeforeUpdate` +
/// `PrepareForUpdate`).
pub fn prepare_for_update(
    resource: &ApiResource,
    subresource: Option<&str>,
    old: &Value,
    new: &mut Value,
) {
    let canonical = ApiResource::canonical(resource.stored);
    if resource.stored == StoredKind::Pod && subresource == Some(super::ephemeral::SUBRESOURCE) {
        super::ephemeral::prepare_update(old, new);
    }
    let Some(map) = new.as_object_mut() else {
        return;
    };
    map.insert("kind".into(), canonical.kind.into());
    map.insert("apiVersion".into(), canonical.api_version().into());
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let meta = object_entry(map, "metadata");
    if meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        copy_field(&old_meta, meta, "uid");
    }
    for field in ["creationTimestamp", "generation"] {
        copy_field(&old_meta, meta, field);
        if old_meta.get(field).is_none() {
            meta.remove(field);
        }
    }
    if old_meta.get("deletionTimestamp").is_some() {
        copy_field(&old_meta, meta, "deletionTimestamp");
    }
    if old_meta.get("deletionGracePeriodSeconds").is_some()
        && meta.get("deletionGracePeriodSeconds").is_none()
    {
        copy_field(&old_meta, meta, "deletionGracePeriodSeconds");
    }
    if resource.stored == StoredKind::CertificateSigningRequest {
        crate::certificates::requests::prepare_update(subresource, old, map);
    } else if resource.has_status {
        let from_old = if subresource == Some("status") {
            "spec"
        } else {
            "status"
        };
        match old.get(from_old) {
            Some(v) => {
                map.insert(from_old.into(), v.clone());
            }
            None => {
                map.remove(from_old);
            }
        }
        if subresource == Some("status") && resource.stored == StoredKind::Pod {
            // pods/status may not touch owner references or the deletion timestamp.
            let meta = object_entry(map, "metadata");
            meta.remove("ownerReferences");
            copy_field(&old_meta, meta, "ownerReferences");
            meta.remove("deletionTimestamp");
            copy_field(&old_meta, meta, "deletionTimestamp");
        }
    }
    if resource.stored == StoredKind::Pod {
        super::pod_defaults::keep_admitted_priority(old, map);
        super::pod_defaults::alias_service_account(map);
    }
    if resource.stored == StoredKind::Secret {
        super::config_data::prepare_secret(map);
    }
    if resource.stored == StoredKind::Service {
        super::services::keep_allocated(old, map);
    }
    crate::api::typed::round_trip(resource.stored, new);
    if let Some(map) = new.as_object_mut() {
        if resource.stored == StoredKind::Pod {
            super::pod_generation::bump_on_spec_change(old, map);
            if subresource == Some("status") {
                super::pod_generation::preserve_observed_generation(old, map);
            }
        }
        super::go_fields::fill(resource.stored, map);
    }
}

/// Whether a PUT without `metadata.resourceVersion` overwrites the object (`true`) or is 422
/// Invalid (`AllowUnconditionalUpdate()` of the kind's registry strategy). Of the kinds served,
/// only the coordination Lease strategy refuses.
pub fn allows_unconditional_update(kind: StoredKind) -> bool {
    kind != StoredKind::Lease
}

/// Whether a PUT to a missing object creates it (`AllowCreateOnUpdate()`): Leases and Events
/// yes, every other kind served no (404).
pub fn allows_create_on_update(kind: StoredKind) -> bool {
    matches!(kind, StoredKind::Lease | StoredKind::Event)
}

/// Validation shared by every kind on create: the name and a few kind-specific required fields.
pub fn validate_create(resource: &ApiResource, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if let Some(detail) = name_problem(resource, name) {
        errors.push(FieldError::invalid("metadata.name", &json!(name), &detail));
    }
    match resource.stored {
        StoredKind::Pod => nodepulse_validation::pod::validate_pod_fields(object, &mut errors),
        StoredKind::Lease => validate_lease_spec(object, &mut errors),
        StoredKind::ConfigMap | StoredKind::Secret => {
            super::config_data::validate_keys(resource.stored, object, &mut errors);
        }
        StoredKind::Service => super::services::validate(object, &mut errors),
        StoredKind::RuntimeClass => super::node_kinds::validate(object, &mut errors),
        StoredKind::CertificateSigningRequest => {
            crate::certificates::requests::validate_create(object, &mut errors);
        }
        other => super::storage_kinds::validate(other, object, &mut errors),
    }
    errors
}

/// `ValidateLeaseSpec`, on create and update alike.
fn validate_lease_spec(lease: &Value, errors: &mut Vec<FieldError>) {
    if let Some(d) = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .filter(|d| *d <= 0)
    {
        errors.push(FieldError::invalid(
            "spec.leaseDurationSeconds",
            &json!(d),
            "must be greater than 0",
        ));
    }
}

/// Immutable metadata on update (`ValidateObjectMetaUpdate`), and the Lease spec rules
/// (`ValidateLeaseUpdate` validates the new spec as create does).
pub fn validate_update(resource: &ApiResource, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["name", "namespace", "uid"] {
        let old_value = old
            .pointer(&format!("/metadata/{field}"))
            .cloned()
            .unwrap_or(json!(""));
        let new_value = new
            .pointer(&format!("/metadata/{field}"))
            .cloned()
            .unwrap_or(json!(""));
        if old_value != new_value {
            errors.push(FieldError::invalid(
                &format!("metadata.{field}"),
                &new_value,
                "field is immutable",
            ));
        }
    }
    if resource.stored == StoredKind::Lease {
        validate_lease_spec(new, &mut errors);
    }
    if resource.stored == StoredKind::Pod {
        super::ephemeral::validate_update(old, new, &mut errors);
        // `ValidatePodUpdate` and `ValidatePodStatusUpdate`: the class set at create stays.
        let class = |pod: &Value| {
            pod.pointer("/status/qosClass")
                .cloned()
                .unwrap_or(json!(""))
        };
        if class(old) != class(new) {
            errors.push(FieldError::invalid(
                "status.qosClass",
                &class(new),
                "field is immutable",
            ));
        }
    }
    if resource.stored == StoredKind::CertificateSigningRequest {
        crate::certificates::requests::validate_update(old, new, &mut errors);
    }
    if resource.stored == StoredKind::RuntimeClass {
        super::node_kinds::validate(new, &mut errors);
        super::node_kinds::validate_update(old, new, &mut errors);
    }
    super::storage_kinds::validate(resource.stored, new, &mut errors);
    super::storage_kinds::validate_update(resource.stored, old, new, &mut errors);
    if matches!(resource.stored, StoredKind::ConfigMap | StoredKind::Secret) {
        super::config_data::validate_keys(resource.stored, new, &mut errors);
        super::config_data::validate_immutable(resource.stored, old, new, &mut errors);
    }
    errors
}

fn name_problem(resource: &ApiResource, name: &str) -> Option<String> {
    // `ValidateCertificateRequestName` accepts any name (the kubelet's are base64url).
    if resource.stored == StoredKind::CertificateSigningRequest {
        return None;
    }
    if resource.stored == StoredKind::Namespace {
        let ok = name.len() <= 63 && is_label(name);
        return (!ok).then(|| DNS1123_LABEL_MESSAGE.to_string());
    }
    let ok = name.len() <= 253 && is_subdomain(name);
    (!ok).then(|| DNS1123_SUBDOMAIN_MESSAGE.to_string())
}

fn add_not_ready_taint(node: &mut Map<String, Value>) {
    let spec = object_entry(node, "spec");
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    let Some(list) = taints.as_array_mut() else {
        return;
    };
    let present = list.iter().any(|t| {
        t.get("key").and_then(Value::as_str) == Some(NOT_READY_TAINT_KEY)
            && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
    });
    if !present {
        list.push(json!({"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}));
    }
}

fn prepare_namespace(namespace: &mut Map<String, Value>) {
    let name = namespace
        .get("metadata")
        .and_then(|m| m.get("name"))
        .cloned()
        .unwrap_or(json!(""));
    object_entry(object_entry(namespace, "metadata"), "labels")
        .insert("kubernetes.io/metadata.name".into(), name);
    object_entry(namespace, "spec").insert("finalizers".into(), json!(["kubernetes"]));
    namespace.insert("status".into(), json!({"phase": "Active"}));
}

/// The JSON object at `map[key]`, created (or replacing a non-object) when needed.
pub fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("entry was just made an object"),
    }
}

fn copy_field(from: &Value, to: &mut Map<String, Value>, field: &str) {
    if let Some(v) = from.get(field) {
        to.insert(field.into(), v.clone());
    }
}

#[cfg(test)]
#[path = "strategy_tests.rs"]
mod tests;
