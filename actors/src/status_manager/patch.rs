//! The pod status PATCH body, as the kubelet's `PatchPodStatus` builds it: a two-way strategic
//! merge diff from `{status: old}` to `{metadata: {uid}, status: merged}`. The UID makes the
//! patch a precondition (the server rejects it for a re-created pod). Lists follow the
//! apiserver's schema: `conditions` merge by `type`, `podIPs`/`hostIPs` by `ip`, every other
//! list (container statuses included) is atomic and sent whole. Both statuses are diffed in the
//! form the API serves them (`served`), so Go's empty fields are no change. Pure.

use k8s_openapi::api::core::v1::PodStatus;
use serde_json::{Map, Value, json};

use super::served::without_empty_fields;

/// The patch from `old` to `merged` for the pod with `uid`, or `None` when it would carry
/// only the UID (nothing to send).
pub fn pod_status_patch(uid: &str, old: &PodStatus, merged: &PodStatus) -> Option<Value> {
    let mut old = serde_json::to_value(old).ok()?;
    let mut new = serde_json::to_value(merged).ok()?;
    without_empty_fields(&mut old);
    without_empty_fields(&mut new);
    let status = diff_objects(&old, &new, true);
    (!status.is_empty()).then(|| json!({ "metadata": { "uid": uid }, "status": status }))
}

/// The merge key of a list directly under `status`, `None` for atomic lists.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "conditions" => Some("type"),
        "podIPs" | "hostIPs" => Some("ip"),
        _ => None,
    }
}

fn diff_objects(old: &Value, new: &Value, top: bool) -> Map<String, Value> {
    let empty = Map::new();
    let old = old.as_object().unwrap_or(&empty);
    let new = new.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    for (field, new_value) in new {
        let old_value = old.get(field);
        if old_value == Some(new_value) {
            continue;
        }
        match (merge_key(field).filter(|_| top), old_value) {
            (Some(key), _) => {
                let (order, entries) =
                    diff_keyed(old_value.unwrap_or(&Value::Null), new_value, key);
                if let Some(order) = order {
                    out.insert(format!("$setElementOrder/{field}"), order);
                }
                if !entries.is_empty() {
                    out.insert(field.clone(), Value::Array(entries));
                }
            }
            (None, Some(previous @ Value::Object(_))) if new_value.is_object() => {
                let nested = diff_objects(previous, new_value, false);
                if !nested.is_empty() {
                    out.insert(field.clone(), Value::Object(nested));
                }
            }
            _ => {
                out.insert(field.clone(), new_value.clone());
            }
        }
    }
    for field in old.keys() {
        if !new.contains_key(field) {
            out.insert(field.clone(), Value::Null);
        }
    }
    out
}

/// A list merged by `key`: the order directive (when anything changed) and the changed
/// entries, each with its key and its changed fields; vanished entries are deleted.
fn diff_keyed(old: &Value, new: &Value, key: &str) -> (Option<Value>, Vec<Value>) {
    let old_list = old.as_array().cloned().unwrap_or_default();
    let new_list = new.as_array().cloned().unwrap_or_default();
    let key_of = |item: &Value| item[key].as_str().map(str::to_owned);
    let mut entries = Vec::new();
    for item in &new_list {
        let Some(name) = key_of(item) else {
            continue;
        };
        match old_list
            .iter()
            .find(|previous| key_of(previous).as_deref() == Some(name.as_str()))
        {
            None => entries.push(item.clone()),
            Some(previous) if previous == item => {}
            Some(previous) => {
                let mut changed = diff_objects(previous, item, false);
                changed.insert(key.to_owned(), Value::String(name));
                entries.push(Value::Object(changed));
            }
        }
    }
    for previous in &old_list {
        if let Some(name) = key_of(previous)
            .filter(|name| !new_list.iter().any(|i| key_of(i).as_deref() == Some(name)))
        {
            entries.push(json!({ "$patch": "delete", key: name }));
        }
    }
    let old_order: Vec<Option<String>> = old_list.iter().map(key_of).collect();
    let new_order: Vec<Option<String>> = new_list.iter().map(key_of).collect();
    if entries.is_empty() && old_order == new_order {
        return (None, entries);
    }
    let order = new_order
        .into_iter()
        .flatten()
        .map(|name| json!({ key: name }))
        .collect();
    (Some(Value::Array(order)), entries)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodStatus;
    use serde_json::{Value, json};

    use super::pod_status_patch;

    fn status(value: Value) -> PodStatus {
        serde_json::from_value(value).expect("status")
    }

    fn container(name: &str, ready: bool) -> Value {
        json!({"name": name, "image": "nginx", "imageID": "", "ready": ready, "restartCount": 0, "state": {"running": {}}})
    }

    /// `container` as kube-apiserver serves it: Go writes the `lastState` struct even when empty.
    fn served(name: &str, ready: bool) -> Value {
        let mut served = container(name, ready);
        served["lastState"] = json!({});
        served
    }

    /// `container` as a PATCH carries it: without the empty `imageID` (absent and `""` are one
    /// value to Go).
    fn sent(name: &str, ready: bool) -> Value {
        json!({"name": name, "image": "nginx", "ready": ready, "restartCount": 0, "state": {"running": {}}})
    }

    #[test]
    fn pod_status_patch_table() {
        let t0 = "2026-01-01T00:00:00Z";
        let t1 = "2026-01-01T00:00:05Z";
        let cases: Vec<(&str, Value, Value, Option<Value>)> = vec![
            (
                "an identical status carries only the uid: no patch",
                json!({"phase": "Running"}),
                json!({"phase": "Running"}),
                None,
            ),
            (
                "a scalar change is sent with the uid precondition",
                json!({"phase": "Pending"}),
                json!({"phase": "Running", "hostIP": "10.0.0.1"}),
                Some(
                    json!({"metadata": {"uid": "u1"}, "status": {"phase": "Running", "hostIP": "10.0.0.1"}}),
                ),
            ),
            (
                "a field that vanished is deleted with null",
                json!({"phase": "Failed", "reason": "Evicted"}),
                json!({"phase": "Failed"}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {"reason": null}})),
            ),
            (
                "conditions merge by type: only the changed fields of changed entries, with the order",
                json!({"conditions": [
                    {"type": "example.com/gate", "status": "True"},
                    {"type": "Ready", "status": "False", "lastTransitionTime": t0}]}),
                json!({"conditions": [
                    {"type": "example.com/gate", "status": "True"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": t1}]}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {
                    "$setElementOrder/conditions": [{"type": "example.com/gate"}, {"type": "Ready"}],
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t1}]}})),
            ),
            (
                "a new condition is sent whole, a vanished one deleted",
                json!({"conditions": [{"type": "PodScheduled", "status": "True"}]}),
                json!({"conditions": [{"type": "Ready", "status": "True"}]}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {
                    "$setElementOrder/conditions": [{"type": "Ready"}],
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"$patch": "delete", "type": "PodScheduled"}]}})),
            ),
            (
                "container statuses are atomic: one flipped container resends the whole list, without Go's empties",
                json!({"containerStatuses": [container("a", true), container("b", false)]}),
                json!({"containerStatuses": [container("a", true), container("b", true)]}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {
                    "containerStatuses": [sent("a", true), sent("b", true)]}})),
            ),
            (
                "the status as the API serves it back (lastState {}, no empty strings) is no change",
                json!({"phase": "Running", "containerStatuses": [served("a", true)],
                    "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}]}),
                json!({"phase": "Running", "message": "", "containerStatuses": [container("a", true)],
                    "conditions": [{"type": "Ready", "status": "True", "reason": ""}]}),
                None,
            ),
            (
                "podIPs merge by ip",
                json!({}),
                json!({"podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}]}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {
                    "podIP": "10.1.0.5",
                    "$setElementOrder/podIPs": [{"ip": "10.1.0.5"}],
                    "podIPs": [{"ip": "10.1.0.5"}]}})),
            ),
            (
                "the same conditions in another order send only the order",
                json!({"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}),
                json!({"conditions": [{"type": "B", "status": "True"}, {"type": "A", "status": "True"}]}),
                Some(json!({"metadata": {"uid": "u1"}, "status": {
                    "$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}]}})),
            ),
        ];
        for (name, old, new, expected) in cases {
            assert_eq!(
                pod_status_patch("u1", &status(old), &status(new)),
                expected,
                "{name}"
            );
        }
    }
}
