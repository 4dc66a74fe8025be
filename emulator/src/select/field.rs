//! Field selectors: the per-kind supported field labels (as kube-apiserver's `GetAttrs` and field
//! label conversion functions define them) and matching of `=`, `==`, `!=` requirements.

use serde_json::Value;

use crate::api::{ApiResource, StoredKind};

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` parameter for `resource`. Unknown fields are rejected with
    /// kube-apiserver's message, `field label not supported: <field>`.
    pub fn parse(text: &str, resource: &ApiResource) -> Result<FieldSelector, String> {
        let mut requirements = Vec::new();
        for part in split_unescaped(text, ',') {
            if part.trim().is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                ));
            };
            let field = canonical_field(field.trim(), resource)
                .ok_or_else(|| format!("field label not supported: {}", field.trim()))?;
            requirements.push((field.to_string(), equal, unescape(value.trim())));
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether `object` (stored form) satisfies every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|(field, equal, value)| (field_value(object, field) == *value) == *equal)
    }
}

/// Maps a field label to the stored-form path it selects on, or `None` if unsupported.
fn canonical_field(field: &str, resource: &ApiResource) -> Option<&'static str> {
    const POD: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ];
    const EVENT: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
    let allowed: &[&'static str] = match resource.stored {
        StoredKind::Node => &["metadata.name", "spec.unschedulable"],
        StoredKind::Namespace => &["metadata.name", "status.phase"],
        StoredKind::Lease => &["metadata.name", "metadata.namespace"],
        StoredKind::Pod => POD,
        StoredKind::Event => EVENT,
        StoredKind::PersistentVolumeClaim => &["metadata.name", "metadata.namespace"],
        StoredKind::PersistentVolume
        | StoredKind::CsiDriver
        | StoredKind::CsiNode
        | StoredKind::RuntimeClass
        | StoredKind::VolumeAttachment => &["metadata.name"],
        StoredKind::CertificateSigningRequest => &["metadata.name", "spec.signerName"],
        StoredKind::ConfigMap | StoredKind::ServiceAccount | StoredKind::Service => {
            &["metadata.name", "metadata.namespace"]
        }
        StoredKind::Secret => &["metadata.name", "metadata.namespace", "type"],
    };
    // events.k8s.io/v1 names some event fields differently; they select the same stored field.
    let field = if resource.group == "events.k8s.io" {
        match field {
            "reportingController" => "reportingComponent",
            "deprecatedSource" => "source",
            other => other
                .strip_prefix("regarding.")
                .map_or(other, |rest| match rest {
                    "kind" => "involvedObject.kind",
                    "namespace" => "involvedObject.namespace",
                    "name" => "involvedObject.name",
                    "uid" => "involvedObject.uid",
                    "apiVersion" => "involvedObject.apiVersion",
                    "resourceVersion" => "involvedObject.resourceVersion",
                    "fieldPath" => "involvedObject.fieldPath",
                    _ => other,
                }),
        }
    } else {
        field
    };
    allowed.iter().copied().find(|f| *f == field)
}

/// The string a field selector compares for `field` (missing fields are "", as in Go).
fn field_value(object: &Value, field: &str) -> String {
    let value = match field {
        "status.podIPs" => object.pointer("/status/podIPs/0/ip"),
        "source" => object.pointer("/source/component"),
        _ => {
            let pointer = format!("/{}", field.replace('.', "/"));
            object.pointer(&pointer)
        }
    };
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Null) | None => match field {
            "spec.unschedulable" | "spec.hostNetwork" => "false".to_string(),
            _ => String::new(),
        },
        Some(other) => other.to_string(),
    }
}

fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            c if c == separator && !escaped => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => escaped = false,
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resource::{EVENTS_V1, NODES, PODS};
    use serde_json::json;

    #[test]
    fn pods_select_on_node_name_and_phase() {
        let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let s =
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Succeeded", &PODS).expect("valid");
        assert!(s.matches(&pod));
        let s = FieldSelector::parse("spec.nodeName=n2", &PODS).expect("valid");
        assert!(!s.matches(&pod));
        let s = FieldSelector::parse("spec.nodeName=", &PODS).expect("valid");
        assert!(!s.matches(&pod));
    }

    #[test]
    fn unsupported_fields_are_rejected_with_the_server_message() {
        assert_eq!(
            FieldSelector::parse("spec.nodeName=x", &NODES),
            Err("field label not supported: spec.nodeName".into())
        );
    }

    #[test]
    fn events_v1_field_names_map_onto_stored_fields() {
        let event = json!({"involvedObject": {"kind": "Node", "name": "n1"}});
        let s = FieldSelector::parse("regarding.kind=Node,regarding.name=n1", &EVENTS_V1)
            .expect("valid");
        assert!(s.matches(&event));
    }
}
