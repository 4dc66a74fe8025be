//! The status PATCH body: a two-way strategic merge patch from the Node as last known to the
//! Node as just computed, as the kubelet's PatchNodeStatus builds it. Maps are diffed key by
//! key (removed keys become `null`); `status.conditions` merges by `type` with a
//! `$setElementOrder/conditions` directive and only the changed fields of changed entries;
//! changed `status.addresses` are sent whole with `{"$patch":"replace"}`, because their
//! declared merge key (`type`) cannot hold two addresses of one type. Other lists are replaced.
//! Only `metadata.labels`, `metadata.annotations` and `status` are compared: spec never travels.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Map, Value, json};

/// The patch from `original` to `updated`, or `None` when there is nothing to send.
pub fn status_patch(original: &Node, updated: &Node) -> Option<Value> {
    let old = serde_json::to_value(original).ok()?;
    let new = serde_json::to_value(updated).ok()?;
    let mut patch = Map::new();
    let mut metadata = Map::new();
    for field in ["labels", "annotations"] {
        let changes = diff_objects(
            &old["metadata"][field],
            &new["metadata"][field],
            Place::Other,
        );
        if !changes.is_empty() {
            metadata.insert(field.to_owned(), Value::Object(changes));
        }
    }
    if !metadata.is_empty() {
        patch.insert("metadata".to_owned(), Value::Object(metadata));
    }
    let status = diff_objects(&old["status"], &new["status"], Place::Status);
    if !status.is_empty() {
        patch.insert("status".to_owned(), Value::Object(status));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Whether the object being diffed is `status`, whose lists have their own rules.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Status,
    Other,
}

fn diff_objects(old: &Value, new: &Value, place: Place) -> Map<String, Value> {
    let empty = Map::new();
    let old = old.as_object().unwrap_or(&empty);
    let new = new.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    for (key, new_value) in new {
        let old_value = old.get(key);
        if old_value == Some(new_value) {
            continue;
        }
        match (place, key.as_str(), old_value) {
            (Place::Status, "conditions", _) => {
                let (order, entries) =
                    diff_conditions(old_value.unwrap_or(&Value::Null), new_value);
                if !entries.is_empty() || order.is_some() {
                    if let Some(order) = order {
                        out.insert("$setElementOrder/conditions".to_owned(), order);
                    }
                    out.insert("conditions".to_owned(), Value::Array(entries));
                }
            }
            (Place::Status, "addresses", Some(previous))
                if previous.as_array().is_some_and(|list| !list.is_empty()) =>
            {
                let mut replaced = new_value.as_array().cloned().unwrap_or_default();
                replaced.push(json!({ "$patch": "replace" }));
                out.insert(key.clone(), Value::Array(replaced));
            }
            (_, _, Some(previous @ Value::Object(_))) if new_value.is_object() => {
                let nested = diff_objects(previous, new_value, Place::Other);
                if !nested.is_empty() {
                    out.insert(key.clone(), Value::Object(nested));
                }
            }
            _ => {
                out.insert(key.clone(), new_value.clone());
            }
        }
    }
    for key in old.keys() {
        if !new.contains_key(key) {
            out.insert(key.clone(), Value::Null);
        }
    }
    out
}

/// The conditions list merged by `type`: the order directive (when anything changed) and the
/// changed entries, each with its `type` and changed fields; vanished types are deleted.
fn diff_conditions(old: &Value, new: &Value) -> (Option<Value>, Vec<Value>) {
    let old_list = old.as_array().cloned().unwrap_or_default();
    let new_list = new.as_array().cloned().unwrap_or_default();
    let kind = |condition: &Value| condition["type"].as_str().map(str::to_owned);
    let mut entries = Vec::new();
    for condition in &new_list {
        let Some(name) = kind(condition) else {
            continue;
        };
        match old_list
            .iter()
            .find(|previous| kind(previous).as_deref() == Some(name.as_str()))
        {
            None => entries.push(condition.clone()),
            Some(previous) if previous == condition => {}
            Some(previous) => {
                let mut changed = diff_objects(previous, condition, Place::Other);
                changed.insert("type".to_owned(), Value::String(name));
                entries.push(Value::Object(changed));
            }
        }
    }
    for previous in &old_list {
        if let Some(name) =
            kind(previous).filter(|name| !new_list.iter().any(|c| kind(c).as_deref() == Some(name)))
        {
            entries.push(json!({ "$patch": "delete", "type": name }));
        }
    }
    let old_order: Vec<Option<String>> = old_list.iter().map(kind).collect();
    let new_order: Vec<Option<String>> = new_list.iter().map(kind).collect();
    if entries.is_empty() && old_order == new_order {
        return (None, entries);
    }
    let order = new_order
        .into_iter()
        .flatten()
        .map(|name| json!({ "type": name }))
        .collect();
    (Some(Value::Array(order)), entries)
}
