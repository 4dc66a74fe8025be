//! Downward-API `fieldRef` values for env vars: the kubelet's `podFieldSelectorRuntimeValue`
//! (the field paths `ConvertDownwardAPIFieldLabel` accepts, then `ExtractFieldPathAsString`),
//! with its error texts. Pod and host IPs come from the caller.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectFieldSelector;

use super::env::{EnvContext, EnvError};

/// `podFieldSelectorRuntimeValue`: the field paths the kubelet converts, then extracts.
pub(super) fn field_value(
    context: &EnvContext<'_>,
    field: &ObjectFieldSelector,
) -> Result<String, EnvError> {
    let version = field.api_version.as_deref().unwrap_or("v1");
    if version != "v1" {
        return Err(EnvError::FieldPath(format!(
            "unsupported pod version: {version}"
        )));
    }
    let pod = context.pod;
    let path = field.field_path.as_str();
    if let Some((map, key)) = subscripted(path) {
        let map = match map {
            "metadata.labels" => pod.metadata.labels.as_ref(),
            "metadata.annotations" => pod.metadata.annotations.as_ref(),
            _ => {
                return Err(EnvError::FieldPath(format!(
                    "field label does not support subscript: {path}"
                )));
            }
        };
        return Ok(map
            .and_then(|map| map.get(key))
            .cloned()
            .unwrap_or_default());
    }
    let spec = pod.spec.as_ref();
    let joined = |ips: &[String]| ips.join(",");
    Ok(match path {
        "metadata.name" => pod.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
        "metadata.uid" => pod.metadata.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(pod.metadata.labels.as_ref()),
        "metadata.annotations" => format_map(pod.metadata.annotations.as_ref()),
        "spec.nodeName" | "spec.host" => spec
            .and_then(|spec| spec.node_name.clone())
            .unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|spec| spec.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" => context.pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => joined(context.pod_ips),
        "status.hostIP" | "status.hostIPs" if context.host_ips.is_empty() => {
            return Err(EnvError::FieldPath(
                "host IP unknown; known addresses: []".to_owned(),
            ));
        }
        "status.hostIP" => context.host_ips[0].clone(),
        "status.hostIPs" => joined(context.host_ips),
        // Convertible, but the kubelet has no extractor for them.
        "spec.restartPolicy" | "spec.schedulerName" | "status.phase" => {
            return Err(EnvError::FieldPath(format!(
                "unsupported fieldPath: {path}"
            )));
        }
        _ => {
            return Err(EnvError::FieldPath(format!(
                "field label not supported: {path}"
            )));
        }
    })
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`).
fn subscripted(path: &str) -> Option<(&str, &str)> {
    let (map, key) = path.strip_suffix("']")?.split_once("['")?;
    (!map.is_empty()).then_some((map, key))
}

/// `fieldpath.FormatMap`: `key="value"` lines sorted by key, values quoted as Go's `%q`.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    let quote = |value: &str| {
        let mut quoted = String::from('"');
        for character in value.chars() {
            match character {
                '"' => quoted.push_str("\\\""),
                '\\' => quoted.push_str("\\\\"),
                '\n' => quoted.push_str("\\n"),
                '\t' => quoted.push_str("\\t"),
                '\r' => quoted.push_str("\\r"),
                control if control.is_control() => {
                    quoted.push_str(&format!("\\x{:02x}", u32::from(control)))
                }
                other => quoted.push(other),
            }
        }
        quoted.push('"');
        quoted
    };
    let lines: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(key, value)| format!("{key}={}", quote(value)))
        .collect();
    lines.join("\n")
}
