//! The little of strategic merge the status patches use, as the API server applies it: maps
//! merge key by key (`null` removes), lists of conditions, addresses and pod IPs merge by their
//! key (`$patch: delete` removes one, `$setElementOrder` orders them, a `$patch: replace`
//! marker replaces the list), other lists are replaced.

use serde_json::{Value, json};

/// The merge key of a keyed list, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "conditions" | "addresses" => Some("type"),
        "podIPs" | "hostIPs" => Some("ip"),
        _ => None,
    }
}

fn is_replace_marker(entry: &Value) -> bool {
    entry.get("$patch").and_then(Value::as_str) == Some("replace")
}

/// Applies `patch` to `target` in place.
pub fn apply(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (field, value) in fields {
        if field.starts_with("$setElementOrder/") {
            continue;
        }
        match (merge_key(field), value) {
            (_, Value::Null) => {
                target.as_object_mut().map(|object| object.remove(field));
            }
            (Some(_), Value::Array(entries)) if entries.iter().any(is_replace_marker) => {
                let kept = entries.iter().filter(|entry| !is_replace_marker(entry));
                target[field.as_str()] = Value::Array(kept.cloned().collect());
            }
            (Some(key), Value::Array(entries)) => {
                let mut list = target[field.as_str()]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for entry in entries {
                    let position = list.iter().position(|item| item[key] == entry[key]);
                    match (entry.get("$patch"), position) {
                        (Some(_), Some(at)) => {
                            list.remove(at);
                        }
                        (Some(_), None) => {}
                        (None, Some(at)) => apply(&mut list[at], entry),
                        (None, None) => list.push(entry.clone()),
                    }
                }
                if let Some(order) = fields
                    .get(&format!("$setElementOrder/{field}"))
                    .and_then(Value::as_array)
                {
                    list.sort_by_key(|item| order.iter().position(|o| o[key] == item[key]));
                }
                target[field.as_str()] = Value::Array(list);
            }
            (None, Value::Object(_)) if target[field.as_str()].is_object() => {
                apply(&mut target[field.as_str()], value);
            }
            _ => target[field.as_str()] = value.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_merge_keyed_lists_merge_and_markers_apply() {
        let mut node = json!({"status": {
            "capacity": {"cpu": "2", "memory": "8Gi"},
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Gone", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
        }});
        apply(
            &mut node,
            &json!({"status": {
                "capacity": {"memory": "16Gi", "cpu": null},
                "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "MemoryPressure", "status": "False"},
                    {"$patch": "delete", "type": "Gone"},
                ],
                "addresses": [{"$patch": "replace"}, {"type": "Hostname", "address": "w1"}],
            }}),
        );
        assert_eq!(
            node,
            json!({"status": {
                "capacity": {"memory": "16Gi"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "True"},
                ],
                "addresses": [{"type": "Hostname", "address": "w1"}],
            }})
        );
    }
}
