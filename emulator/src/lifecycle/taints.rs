//! The taints the node-lifecycle controller derives from a Node's conditions: NoSchedule taints
//! for Ready False/Unknown, pressure conditions and `spec.unschedulable` (stale ones removed),
//! and the mutually exclusive `not-ready`/`unreachable` NoExecute taints. Pure functions.

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::time::format_time;

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// (condition type, status) → NoSchedule taint key, as `nodeConditionToTaintKeyStatusMap`.
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
];

/// The status of condition `kind` on `node`, if the node reports it.
pub fn condition_status<'a>(node: &'a Value, kind: &str) -> Option<&'a str> {
    node.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?
        .get("status")?
        .as_str()
}

fn is_controller_no_schedule(taint: &Value) -> bool {
    let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
    taint.get("effect").and_then(Value::as_str) == Some("NoSchedule")
        && (key == UNSCHEDULABLE || CONDITION_TAINTS.iter().any(|(_, _, k)| *k == key))
}

/// Rewrites `spec.taints` to what the controller wants for the node's current conditions;
/// returns whether anything changed. Taints the controller does not own are kept in place.
pub fn reconcile(node: &mut Value, now: SystemTime) -> bool {
    let mut wanted_no_schedule: Vec<&str> = CONDITION_TAINTS
        .iter()
        .filter(|(kind, status, _)| condition_status(node, kind) == Some(*status))
        .map(|(_, _, key)| *key)
        .collect();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        wanted_no_schedule.push(UNSCHEDULABLE);
    }
    let wanted_no_execute = match condition_status(node, "Ready") {
        Some("False") => Some(NOT_READY),
        Some("Unknown") => Some(UNREACHABLE),
        _ => None,
    };
    let current: Vec<Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has = |key: &str, effect: &str| {
        current.iter().any(|t| {
            t.get("key").and_then(Value::as_str) == Some(key)
                && t.get("effect").and_then(Value::as_str) == Some(effect)
        })
    };
    let mut next: Vec<Value> = current
        .iter()
        .filter(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            if is_controller_no_schedule(t) {
                return wanted_no_schedule.contains(&key);
            }
            if effect == "NoExecute" && (key == NOT_READY || key == UNREACHABLE) {
                return wanted_no_execute == Some(key);
            }
            true
        })
        .cloned()
        .collect();
    for key in &wanted_no_schedule {
        if !has(key, "NoSchedule") {
            next.push(json!({"key": key, "effect": "NoSchedule"}));
        }
    }
    if let Some(key) = wanted_no_execute.filter(|k| !has(k, "NoExecute")) {
        next.push(json!({"key": key, "effect": "NoExecute", "timeAdded": format_time(now)}));
    }
    if next == current {
        return false;
    }
    if let Some(spec) = node
        .as_object_mut()
        .map(|m| crate::store::strategy::object_entry(m, "spec"))
    {
        if next.is_empty() {
            spec.remove("taints");
        } else {
            spec.insert("taints".into(), Value::Array(next));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn node(ready: &str, taints: Value) -> Value {
        json!({"spec": {"taints": taints}, "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    fn keys(node: &Value) -> Vec<(String, String)> {
        node["spec"]["taints"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| {
                        (
                            t["key"].as_str().unwrap_or("").into(),
                            t["effect"].as_str().unwrap_or("").into(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn ready_node_loses_the_creation_not_ready_taint_and_keeps_foreign_ones() {
        let mut n = node(
            "True",
            json!([{"key": "team", "effect": "NoSchedule"}, {"key": NOT_READY, "effect": "NoSchedule"}]),
        );
        assert!(reconcile(&mut n, UNIX_EPOCH));
        assert_eq!(keys(&n), [("team".to_string(), "NoSchedule".to_string())]);
        assert!(
            !reconcile(&mut n, UNIX_EPOCH),
            "a second pass changes nothing"
        );
    }

    #[test]
    fn unknown_node_gets_both_unreachable_taints_replacing_not_ready() {
        let mut n = node(
            "Unknown",
            json!([{"key": NOT_READY, "effect": "NoSchedule"}, {"key": NOT_READY, "effect": "NoExecute"}]),
        );
        assert!(reconcile(&mut n, UNIX_EPOCH));
        assert_eq!(
            keys(&n),
            [
                (UNREACHABLE.to_string(), "NoSchedule".to_string()),
                (UNREACHABLE.to_string(), "NoExecute".to_string())
            ]
        );
        assert_eq!(n["spec"]["taints"][1]["timeAdded"], "1970-01-01T00:00:00Z");
    }

    #[test]
    fn pressure_conditions_map_to_their_taints() {
        let mut n = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]}});
        assert!(reconcile(&mut n, UNIX_EPOCH));
        assert_eq!(
            keys(&n),
            [(
                "node.kubernetes.io/disk-pressure".to_string(),
                "NoSchedule".to_string()
            )]
        );
    }
}
