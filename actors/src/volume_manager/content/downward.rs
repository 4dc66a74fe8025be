//! The downwardAPI projection (§1.11): `fieldRef` items from the pod's metadata, whole maps as
//! the kubelet renders them (sorted `key="quoted value"` lines), and `resourceFieldRef` items
//! from a container's resources, limits defaulting to the node's allocatable.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, ResourceFieldSelector};

use super::{ContentError, FileProjection, Payload, mode_bits};
use crate::quantity::parse_quantity;

/// The node's allocatable by resource name (cores for `cpu`, bytes otherwise).
pub type NodeAllocatable = BTreeMap<String, f64>;

/// Why one downwardAPI item has no value, in the kubelet's words (the pod spec must change).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownwardApiError {
    #[error("fieldPath {0:?} does not support subscript")]
    Subscript(String),
    #[error("unsupported fieldPath: {0}")]
    FieldPath(String),
    #[error("container {0} not found")]
    NoContainer(String),
    #[error("unsupported container resource : {0}")]
    Resource(String),
}

/// Projects downwardAPI `items` of `pod` into `payload`; every failing item is reported.
pub fn project_items(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    allocatable: &NodeAllocatable,
    payload: &mut Payload,
) -> Vec<ContentError> {
    let mut errors = Vec::new();
    for item in items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(field), _) => field_value(pod, &field.field_path),
            (None, Some(resource)) => resource_value(pod, resource, allocatable),
            (None, None) => continue,
        };
        match value {
            Ok(text) => {
                payload.insert(
                    item.path.clone(),
                    FileProjection {
                        data: text.into_bytes(),
                        mode: mode_bits(item.mode, default_mode),
                        fs_user: None,
                    },
                );
            }
            Err(error) => errors.push(ContentError::DownwardApi(error)),
        }
    }
    errors
}

/// The kubelet's `ExtractFieldPathAsString` for the fields a volume may reference.
fn field_value(pod: &Pod, path: &str) -> Result<String, DownwardApiError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((map, key)) = subscript(path) {
        return match map {
            "metadata.labels" => Ok(labels.get(key).cloned().unwrap_or_default()),
            "metadata.annotations" => Ok(annotations.get(key).cloned().unwrap_or_default()),
            _ => Err(DownwardApiError::Subscript(path.to_owned())),
        };
    }
    match path {
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.annotations" => Ok(format_map(annotations)),
        other => Err(DownwardApiError::FieldPath(other.to_owned())),
    }
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`).
fn subscript(path: &str) -> Option<(&str, &str)> {
    let (map, rest) = path.split_once("['")?;
    Some((map, rest.strip_suffix("']")?))
}

/// Sorted `key="value"` lines, values quoted as Go's `%q` does.
fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(key, value)| format!("{key}={}", go_quote(value)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote` for the characters labels and annotations hold.
pub fn go_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The kubelet's `ExtractResourceValueByContainerNameAndNodeAllocatable`.
fn resource_value(
    pod: &Pod,
    selector: &ResourceFieldSelector,
    allocatable: &NodeAllocatable,
) -> Result<String, DownwardApiError> {
    let name = selector.container_name.as_deref().unwrap_or_default();
    let container = pod
        .spec
        .iter()
        .flat_map(|spec| {
            spec.init_containers
                .iter()
                .flatten()
                .chain(&spec.containers)
        })
        .find(|c| c.name == name)
        .ok_or_else(|| DownwardApiError::NoContainer(name.to_owned()))?;
    let unsupported = || DownwardApiError::Resource(selector.resource.clone());
    let (section, resource) = selector.resource.split_once('.').ok_or_else(unsupported)?;
    let resources = container.resources.as_ref();
    let declared = match section {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return Err(unsupported()),
    }
    .and_then(|map| map.get(resource))
    .and_then(|q| parse_quantity(&q.0).ok());
    let value = match (declared, section) {
        (Some(value), _) => value,
        // Limits default to what the node can give; requests to nothing.
        (None, "limits") => allocatable.get(resource).copied().unwrap_or(0.0),
        (None, _) => 0.0,
    };
    let divisor = selector
        .divisor
        .as_ref()
        .and_then(|q| parse_quantity(&q.0).ok())
        .filter(|d| *d > 0.0)
        .unwrap_or(1.0);
    let scaled = if resource == "cpu" {
        // In millicores, as the kubelet divides `MilliValue`s.
        ((value * 1000.0).ceil() / (divisor * 1000.0).round()).ceil()
    } else {
        (value.ceil() / divisor.round().max(1.0)).ceil()
    };
    Ok(format!("{scaled:.0}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                "labels": {"b": "2", "a": "x\"y"}, "annotations": {"k": "v"}},
            "spec": {"containers": [{"name": "app", "image": "i",
                "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}}}]},
        }))
        .unwrap()
    }

    fn item(value: serde_json::Value) -> DownwardAPIVolumeFile {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn fields_and_resources_render_as_the_kubelet_writes_them() {
        let items = [
            item(json!({"path": "name", "fieldRef": {"fieldPath": "metadata.name"}})),
            item(json!({"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}})),
            item(
                json!({"path": "k", "mode": 0o600, "fieldRef": {"fieldPath": "metadata.annotations['k']"}}),
            ),
            item(
                json!({"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}}),
            ),
            item(
                json!({"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "requests.cpu", "divisor": "1m"}}),
            ),
            item(
                json!({"path": "cpulimit", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}),
            ),
        ];
        let allocatable = NodeAllocatable::from([("cpu".to_owned(), 3.5)]);
        let mut payload = Payload::new();
        let errors = project_items(&pod(), &items, 0o644, &allocatable, &mut payload);
        assert!(errors.is_empty(), "{errors:?}");
        let text = |path: &str| String::from_utf8(payload[path].data.clone()).unwrap();
        assert_eq!(text("name"), "web");
        assert_eq!(text("labels"), "a=\"x\\\"y\"\nb=\"2\"");
        assert_eq!((text("k"), payload["k"].mode), ("v".to_owned(), 0o600));
        assert_eq!(text("mem"), "64");
        assert_eq!(text("cpu"), "250");
        assert_eq!(text("cpulimit"), "4", "the node's 3.5 cores, rounded up");
    }

    #[test]
    fn unknown_fields_and_containers_are_errors() {
        let items = [
            item(json!({"path": "a", "fieldRef": {"fieldPath": "spec.nodeName"}})),
            item(
                json!({"path": "b", "resourceFieldRef": {"containerName": "nope", "resource": "limits.cpu"}}),
            ),
        ];
        let mut payload = Payload::new();
        let errors = project_items(&pod(), &items, 0o644, &NodeAllocatable::new(), &mut payload);
        let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "unsupported fieldPath: spec.nodeName",
                "container nope not found"
            ]
        );
    }
}
