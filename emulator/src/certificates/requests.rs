//! The CertificateSigningRequest registry's rules (`pkg/registry/certificates` and
//! `pkg/apis/certificates/validation`): create stamps the requester into `spec` and clears
//! `status`; `approval` may change only the conditions, `status` only the certificate and the
//! other conditions; the spec never changes after create.

use serde_json::{Map, Value, json};

use super::authority::parse_request;
use crate::api::FieldError;
use crate::config::User;
use crate::time::format_time;

/// Every key usage kube-apiserver accepts (`allValidUsages`), sorted as its message lists them.
const VALID_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// `csrStrategy.PrepareForCreate`: the requester's identity into `spec.username`, `uid`,
/// `groups` (whatever the body said), and an empty status.
pub fn prepare_create(user: Option<&User>, csr: &mut Value) {
    let Some(map) = csr.as_object_mut() else {
        return;
    };
    let spec = map
        .entry("spec")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(spec) = spec {
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        let (name, groups) = match user {
            Some(user) => (user.name.clone(), user.groups.clone()),
            None => (
                "system:anonymous".to_string(),
                vec!["system:unauthenticated".to_string()],
            ),
        };
        spec.insert("username".into(), name.into());
        spec.insert("groups".into(), groups.into());
    }
    map.insert("status".into(), json!({}));
}

/// `validateCertificateSigningRequest` on create: the request parses and its signature
/// holds, usages are given, known and unique, a signer is named, a requested duration is
/// at least 10 minutes.
pub fn validate_create(csr: &Value, errors: &mut Vec<FieldError>) {
    let request = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or("");
    // `spec.request` is `[]byte`: base64 on the wire.
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(request)
        .unwrap_or_default();
    if let Err(error) = parse_request(&bytes) {
        errors.push(FieldError::invalid_shown(
            "spec.request",
            &go_bytes(&bytes),
            &error.to_string(),
        ));
    }
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| u.as_str().unwrap_or(""))
        .collect();
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    let supported: Vec<String> = VALID_USAGES.iter().map(|u| format!("{u:?}")).collect();
    for (index, usage) in usages.iter().enumerate() {
        let field = format!("spec.usages[{index}]");
        if !VALID_USAGES.contains(usage) {
            errors.push(FieldError {
                reason: "FieldValueNotSupported",
                field,
                message: format!(
                    "Unsupported value: {usage:?}: supported values: {}",
                    supported.join(", ")
                ),
            });
        } else if usages[..index].contains(usage) {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field,
                message: format!("Duplicate value: {usage:?}"),
            });
        }
    }
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if signer.is_empty() {
        errors.push(FieldError::required("spec.signerName", ""));
    } else if signer == "kubernetes.io/legacy-unknown" {
        errors.push(FieldError::invalid(
            "spec.signerName",
            &json!(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    }
    if let Some(seconds) = csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .filter(|s| *s < 600)
    {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            &json!(seconds),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
}

/// Go's `%#v` of a byte slice, as field errors print `[]byte` values.
fn go_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().map(|b| format!("{b:#x}")).collect();
    format!("[]byte{{{}}}", shown.join(", "))
}

/// The update strategies' `PrepareForUpdate`: the spec is the old one; through `approval` only
/// the conditions change, through `status` everything but the Approved and Denied ones, through
/// the main resource nothing in `status`. New conditions get their timestamps.
pub fn prepare_update(subresource: Option<&str>, old: &Value, new: &mut Map<String, Value>) {
    copy(old, new, "spec");
    let old_status = old.get("status").cloned().unwrap_or_else(|| json!({}));
    match subresource {
        Some("approval") => {
            let conditions = new.get("status").and_then(|s| s.get("conditions")).cloned();
            let mut status = old_status.clone();
            match conditions {
                Some(conditions) => status["conditions"] = conditions,
                None => {
                    if let Some(s) = status.as_object_mut() {
                        s.remove("conditions");
                    }
                }
            }
            new.insert("status".into(), status);
        }
        Some("status") => {
            let status = new
                .entry("status")
                .or_insert_with(|| json!({}))
                .as_object_mut();
            if let Some(status) = status {
                let decided = |c: &Value| {
                    matches!(
                        c.get("type").and_then(Value::as_str),
                        Some("Approved" | "Denied")
                    )
                };
                let mut conditions: Vec<Value> = status
                    .get("conditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|c| !decided(c))
                    .cloned()
                    .collect();
                let kept = old_status
                    .get("conditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|c| decided(c))
                    .cloned();
                conditions.splice(0..0, kept);
                status.insert("conditions".into(), conditions.into());
            }
        }
        _ => {
            new.insert("status".into(), old_status.clone());
        }
    }
    stamp_conditions(&old_status, new);
}

fn copy(old: &Value, new: &mut Map<String, Value>, field: &str) {
    match old.get(field) {
        Some(value) => new.insert(field.into(), value.clone()),
        None => new.remove(field),
    };
}

/// `populateConditionTimestamps`: a condition without `lastUpdateTime` gets now, and a new or
/// changed-status one without `lastTransitionTime` gets now too.
fn stamp_conditions(old_status: &Value, new: &mut Map<String, Value>) {
    let now = format_time(std::time::SystemTime::now());
    let old_conditions = old_status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(conditions) = new
        .get_mut("status")
        .and_then(|s| s.get_mut("conditions"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for condition in conditions {
        let Some(map) = condition.as_object_mut() else {
            continue;
        };
        if map.get("lastUpdateTime").is_none_or(Value::is_null) {
            map.insert("lastUpdateTime".into(), now.clone().into());
        }
        if map.get("lastTransitionTime").is_none_or(Value::is_null) {
            let previous = old_conditions
                .iter()
                .find(|c| c.get("type") == map.get("type"));
            let transition = match previous {
                Some(previous) if previous.get("status") == map.get("status") => previous
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| now.clone().into()),
                _ => now.clone().into(),
            };
            map.insert("lastTransitionTime".into(), transition);
        }
    }
}

/// `ValidateCertificateSigningRequestUpdate` and its approval/status variants: the conditions
/// are well formed and Approved excludes Denied; once set, an approval, a denial or a
/// certificate stays.
pub fn validate_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let conditions = |csr: &Value| -> Vec<Value> {
        csr.pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new_conditions = conditions(new);
    let mut seen: Vec<&str> = Vec::new();
    for (index, condition) in new_conditions.iter().enumerate() {
        let path = format!("status.conditions[{index}]");
        let kind = condition.get("type").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            errors.push(FieldError::required(&format!("{path}.type"), ""));
        }
        let status = condition
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("");
        if status.is_empty() {
            errors.push(FieldError::required(&format!("{path}.status"), ""));
        } else if !matches!(status, "True" | "False" | "Unknown") {
            errors.push(FieldError {
                reason: "FieldValueNotSupported",
                field: format!("{path}.status"),
                message: format!(
                    "Unsupported value: {status:?}: supported values: \"False\", \"True\", \"Unknown\""
                ),
            });
        }
        let exclusive = match kind {
            "Approved" => seen.contains(&"Denied"),
            "Denied" => seen.contains(&"Approved"),
            _ => false,
        };
        if exclusive {
            errors.push(FieldError::invalid(
                "status.conditions",
                &json!(kind),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if matches!(kind, "Approved" | "Denied" | "Failed") && seen.contains(&kind) {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: format!("{path}.type"),
                message: format!("Duplicate value: {kind:?}"),
            });
        }
        seen.push(kind);
    }
    for kind in ["Approved", "Denied"] {
        let had = conditions(old)
            .iter()
            .any(|c| c.get("type").and_then(Value::as_str) == Some(kind));
        if had && !seen.contains(&kind) {
            errors.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    let certificate = |csr: &Value| {
        csr.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (before, after) = (certificate(old), certificate(new));
    if !before.is_empty() && before != after {
        errors.push(FieldError::forbidden(
            "status.certificate",
            "updates may not modify existing certificate content",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_stamps_the_requester_and_clears_the_status() {
        let mut csr = json!({"spec": {"username": "forged", "groups": ["system:masters"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        prepare_create(Some(&User::node("n1")), &mut csr);
        assert_eq!(csr["spec"]["username"], "system:node:n1");
        assert_eq!(
            csr["spec"]["groups"],
            json!(["system:nodes", "system:authenticated"])
        );
        assert_eq!(csr["status"], json!({}));
    }

    #[test]
    fn create_validation_names_each_bad_field() {
        let csr = json!({"spec": {"request": "", "usages": ["client auth", "client auth", "bogus"],
            "signerName": "", "expirationSeconds": 60}});
        let mut errors = Vec::new();
        validate_create(&csr, &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.request",
                "spec.usages[1]",
                "spec.usages[2]",
                "spec.signerName",
                "spec.expirationSeconds"
            ]
        );
        assert_eq!(
            errors[0].message,
            "Invalid value: []byte{}: PEM block type must be CERTIFICATE REQUEST"
        );
        assert_eq!(
            errors[4].message,
            "Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"
        );
    }

    #[test]
    fn approval_changes_only_conditions_and_a_decision_stays() {
        let old = json!({"spec": {"username": "u"}, "status": {"certificate": "Y2VydA=="}});
        let mut new = json!({"spec": {"username": "changed"},
            "status": {"certificate": "", "conditions": [{"type": "Approved", "status": "True"}]}});
        let map = new.as_object_mut().expect("object");
        prepare_update(Some("approval"), &old, map);
        assert_eq!(new["spec"]["username"], "u");
        assert_eq!(new["status"]["certificate"], "Y2VydA==");
        assert_eq!(new["status"]["conditions"][0]["type"], "Approved");
        assert!(new["status"]["conditions"][0]["lastUpdateTime"].is_string());

        let mut errors = Vec::new();
        let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"},
            {"type": "Denied", "status": "True"}]}});
        validate_update(&json!({}), &both, &mut errors);
        assert_eq!(
            errors[0].message,
            "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        );
        let mut errors = Vec::new();
        validate_update(&new, &json!({"status": {}}), &mut errors);
        let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "Forbidden: updates may not remove a condition of type \"Approved\"",
                "Forbidden: updates may not modify existing certificate content"
            ]
        );
    }

    #[test]
    fn status_updates_keep_the_decision() {
        let old = json!({"spec": {}, "status": {"conditions": [{"type": "Approved", "status": "True",
            "lastUpdateTime": "t", "lastTransitionTime": "t"}]}});
        let mut new = json!({"status": {"certificate": "Y2VydA==", "conditions": []}});
        let map = new.as_object_mut().expect("object");
        prepare_update(Some("status"), &old, map);
        assert_eq!(new["status"]["conditions"][0]["type"], "Approved");
        assert_eq!(new["status"]["certificate"], "Y2VydA==");
    }
}
