//! ConfigMaps and Secrets as kube-apiserver stores them: a Secret's `stringData` folded into
//! `data` (base64) and its `type` defaulted to `Opaque`; keys checked as config keys; and the
//! `immutable` rule — once set, neither it nor the data may change.

use k8s_openapi::ByteString;
use serde_json::{Map, Value, json};

use super::strategy::object_entry;
use crate::api::{FieldError, StoredKind};

const KEY_FORMAT: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

/// The v1 → internal conversion (`stringData` overwrites `data` keys) and defaulting.
pub fn prepare_secret(secret: &mut Map<String, Value>) {
    if let Some(Value::Object(strings)) = secret.remove("stringData") {
        let data = object_entry(secret, "data");
        for (key, value) in strings {
            let bytes = value.as_str().unwrap_or_default().as_bytes().to_vec();
            let encoded = serde_json::to_value(ByteString(bytes)).unwrap_or(Value::Null);
            data.insert(key, encoded);
        }
    }
    let typed = secret
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed {
        secret.insert("type".into(), json!("Opaque"));
    }
}

/// `IsConfigMapKey` on every key of `data` (and a ConfigMap's `binaryData`, which must not
/// repeat a `data` key).
pub fn validate_keys(kind: StoredKind, object: &Value, errors: &mut Vec<FieldError>) {
    let keys = |field: &str| -> Vec<String> {
        object
            .get(field)
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let data = keys("data");
    for key in &data {
        check_key("data", key, errors);
    }
    if kind == StoredKind::ConfigMap {
        for key in keys("binaryData") {
            check_key("binaryData", &key, errors);
            if data.contains(&key) {
                errors.push(FieldError::invalid(
                    &format!("binaryData[{key}]"),
                    &json!(key),
                    "duplicate of key present in data",
                ));
            }
        }
    }
}

fn check_key(field: &str, key: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{field}[{key}]");
    let value = json!(key);
    let valid_chars = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if key.len() > 253 {
        errors.push(FieldError::invalid(
            &path,
            &value,
            "must be no more than 253 characters",
        ));
    }
    if !valid_chars {
        errors.push(FieldError::invalid(&path, &value, KEY_FORMAT));
    }
    if key == "." {
        errors.push(FieldError::invalid(&path, &value, "must not be '.'"));
    } else if key == ".." {
        errors.push(FieldError::invalid(&path, &value, "must not be '..'"));
    } else if key.starts_with("..") {
        errors.push(FieldError::invalid(
            &path,
            &value,
            "must not start with '..'",
        ));
    }
}

/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate`: an immutable object keeps its data
/// (and a Secret its `type` always).
pub fn validate_immutable(
    kind: StoredKind,
    old: &Value,
    new: &Value,
    errors: &mut Vec<FieldError>,
) {
    if kind == StoredKind::Secret && old.get("type") != new.get("type") {
        errors.push(FieldError::invalid(
            "type",
            new.get("type").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    let immutable = |o: &Value| o.get("immutable").and_then(Value::as_bool) == Some(true);
    if !immutable(old) {
        return;
    }
    if !immutable(new) {
        errors.push(FieldError::forbidden("immutable", IMMUTABLE));
    }
    let fields: &[&str] = match kind {
        StoredKind::ConfigMap => &["data", "binaryData"],
        _ => &["data"],
    };
    for field in fields {
        let empty = json!({});
        let normalise = |o: &Value| {
            o.get(*field)
                .cloned()
                .filter(|v| v != &empty && !v.is_null())
        };
        if normalise(old) != normalise(new) {
            errors.push(FieldError::forbidden(field, IMMUTABLE));
        }
    }
}
