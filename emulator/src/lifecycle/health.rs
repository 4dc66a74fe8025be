//! Node health as kube-controller-manager's `monitorNodeHealth` judges it: a probe timestamp on
//! the controller's own monotonic clock, refreshed when the Ready heartbeat changes or the Lease's
//! `renewTime` moves forward, and the conditions to mark Unknown once the grace period passes.
//! Pure functions; the controller supplies `now`.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::time::{format_time, parse_time};

/// The condition types set to Unknown when a node goes silent (NetworkUnavailable is left alone).
pub const MONITORED: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What the controller remembers about one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeHealth {
    /// Controller time of the last sign of life.
    pub probe: Instant,
    ready_heartbeat: Option<String>,
    lease_renew: Option<SystemTime>,
}

impl NodeHealth {
    /// Updates (or starts) the record from the current Node and Lease.
    pub fn observe(
        previous: Option<&NodeHealth>,
        node: &Value,
        lease: Option<&Value>,
        now: Instant,
    ) -> NodeHealth {
        let ready_heartbeat = ready_condition(node)
            .and_then(|c| c.get("lastHeartbeatTime"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let lease_renew = lease
            .and_then(|l| l.pointer("/spec/renewTime"))
            .and_then(Value::as_str)
            .and_then(parse_time);
        let Some(previous) = previous else {
            return NodeHealth {
                probe: now,
                ready_heartbeat,
                lease_renew,
            };
        };
        let mut next = previous.clone();
        if ready_heartbeat != previous.ready_heartbeat {
            next.probe = now;
            next.ready_heartbeat = ready_heartbeat;
        }
        // Only a renewTime strictly later than the last one counts (a clock stepping back does not).
        if lease_renew.is_some()
            && (previous.lease_renew.is_none() || lease_renew > previous.lease_renew)
        {
            next.probe = now;
            next.lease_renew = lease_renew;
        }
        next
    }

    /// Whether the node has been silent longer than its grace period (the startup grace when it
    /// never posted a Ready condition).
    pub fn is_stale(
        &self,
        node: &Value,
        now: Instant,
        grace: Duration,
        startup_grace: Duration,
    ) -> bool {
        let grace = if ready_condition(node).is_some() {
            grace
        } else {
            startup_grace
        };
        now.saturating_duration_since(self.probe) > grace
    }
}

fn ready_condition(node: &Value) -> Option<&Value> {
    node.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
}

/// Sets the monitored conditions to Unknown as the controller does; returns whether Ready
/// changed (the controller writes the Node only then).
pub fn mark_unknown(node: &mut Value, now: SystemTime) -> bool {
    let created = node
        .pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(Value::Null);
    let was_ready_status = ready_condition(node)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(status) = node
        .as_object_mut()
        .map(|m| crate::store::strategy::object_entry(m, "status"))
    else {
        return false;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conditions.as_array_mut() else {
        return false;
    };
    for kind in MONITORED {
        match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)) {
            None => list.push(json!({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.", "lastHeartbeatTime": created, "lastTransitionTime": format_time(now)})),
            Some(c) if c.get("status").and_then(Value::as_str) != Some("Unknown") => {
                c["status"] = "Unknown".into();
                c["reason"] = "NodeStatusUnknown".into();
                c["message"] = "Kubelet stopped posting node status.".into();
                c["lastTransitionTime"] = format_time(now).into();
            }
            Some(_) => {}
        }
    }
    was_ready_status.as_deref() != Some("Unknown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn node_with_heartbeat(at: &str) -> Value {
        json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": at},
            {"type": "NetworkUnavailable", "status": "False"}]}})
    }

    fn lease(renew: &str) -> Value {
        json!({"spec": {"renewTime": renew}})
    }

    #[test]
    fn lease_renewals_refresh_the_probe_only_when_later() {
        let t0 = Instant::now();
        let node = node_with_heartbeat("2024-01-01T00:00:00Z");
        let h = NodeHealth::observe(None, &node, Some(&lease("2024-01-01T00:00:10.000000Z")), t0);
        let later = t0 + Duration::from_secs(20);
        let renewed = NodeHealth::observe(
            Some(&h),
            &node,
            Some(&lease("2024-01-01T00:00:20.000000Z")),
            later,
        );
        assert_eq!(renewed.probe, later);
        let stepped_back = NodeHealth::observe(
            Some(&h),
            &node,
            Some(&lease("2024-01-01T00:00:05.000000Z")),
            later,
        );
        assert_eq!(stepped_back.probe, t0);
    }

    #[test]
    fn staleness_uses_the_startup_grace_without_a_ready_condition() {
        let t0 = Instant::now();
        let h = NodeHealth::observe(None, &json!({}), None, t0);
        let at = t0 + Duration::from_secs(55);
        assert!(!h.is_stale(
            &json!({}),
            at,
            Duration::from_secs(50),
            Duration::from_secs(60)
        ));
        assert!(h.is_stale(
            &node_with_heartbeat("x"),
            at,
            Duration::from_secs(50),
            Duration::from_secs(60)
        ));
    }

    #[test]
    fn silent_node_conditions_become_unknown_with_the_controller_reason() {
        let mut node = node_with_heartbeat("2024-01-01T00:00:00Z");
        assert!(mark_unknown(&mut node, UNIX_EPOCH));
        let conditions = node["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ready = &conditions[0];
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("Unknown"), Some("NodeStatusUnknown"))
        );
        assert_eq!(ready["message"], "Kubelet stopped posting node status.");
        assert_eq!(ready["lastHeartbeatTime"], "2024-01-01T00:00:00Z");
        assert_eq!(
            conditions[1]["status"], "False",
            "NetworkUnavailable is left alone"
        );
        let memory = conditions
            .iter()
            .find(|c| c["type"] == "MemoryPressure")
            .cloned()
            .unwrap_or_default();
        assert_eq!(memory["reason"], "NodeStatusNeverUpdated");
        assert!(
            !mark_unknown(&mut node, UNIX_EPOCH),
            "already Unknown: no second write"
        );
    }
}
