//! The four conditions. MemoryPressure, DiskPressure and PIDPressure share one state machine;
//! Ready collects the runtime, network and capacity errors in the kubelet's order and
//! aggregates them into its message. Heartbeat times always move; transition times only on a
//! change of status, and only then are events returned.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{Node, NodeCondition},
    apimachinery::pkg::apis::meta::v1::Time,
};
use tokio::time::Instant;

use super::{NodeEvent, StatusInputs};
use crate::messages::RuntimeHealth;

/// A runtime with no full success for this long is "down": the kubelet's constant
/// `maxWaitForContainerRuntime`, the default of `containerRuntimeDownAfter`.
pub const RUNTIME_DOWN_AFTER: Duration = Duration::from_secs(30);

/// One pressure condition: its type and the kubelet's reasons, messages and event reasons
/// (true first, then false).
pub(super) struct Pressure {
    kind: &'static str,
    when_true: (&'static str, &'static str, &'static str),
    when_false: (&'static str, &'static str, &'static str),
    under: fn(&crate::messages::PressureChanged) -> bool,
}

pub(super) const PRESSURES: [Pressure; 3] = [
    Pressure {
        kind: "MemoryPressure",
        when_true: (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
            "NodeHasInsufficientMemory",
        ),
        when_false: (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            "NodeHasSufficientMemory",
        ),
        under: |pressure| pressure.memory_pressure,
    },
    Pressure {
        kind: "DiskPressure",
        when_true: (
            "KubeletHasDiskPressure",
            "kubelet has disk pressure",
            "NodeHasDiskPressure",
        ),
        when_false: (
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            "NodeHasNoDiskPressure",
        ),
        under: |pressure| pressure.disk_pressure,
    },
    Pressure {
        kind: "PIDPressure",
        when_true: (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
            "NodeHasInsufficientPID",
        ),
        when_false: (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            "NodeHasSufficientPID",
        ),
        under: |pressure| pressure.pid_pressure,
    },
];

fn conditions(node: &mut Node) -> &mut Vec<NodeCondition> {
    node.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
}

pub(super) fn set_pressure(
    pressure: &Pressure,
    inputs: &StatusInputs<'_>,
    now: Timestamp,
    node: &mut Node,
) -> Vec<NodeEvent> {
    let list = conditions(node);
    let index = match list
        .iter()
        .position(|condition| condition.type_ == pressure.kind)
    {
        Some(index) => index,
        None => {
            list.push(NodeCondition {
                type_: pressure.kind.to_owned(),
                status: "Unknown".to_owned(),
                ..NodeCondition::default()
            });
            list.len() - 1
        }
    };
    let condition = &mut list[index];
    condition.last_heartbeat_time = Some(Time(now));
    let under = inputs.pressure.is_some_and(pressure.under);
    let (status, (reason, message, event)) = if under {
        ("True", pressure.when_true)
    } else {
        ("False", pressure.when_false)
    };
    if condition.status == status {
        return Vec::new();
    }
    condition.status = status.to_owned();
    condition.reason = Some(reason.to_owned());
    condition.message = Some(message.to_owned());
    condition.last_transition_time = Some(Time(now));
    vec![NodeEvent::normal(
        event,
        format!("Node {} status is now: {event}", inputs.node_name),
    )]
}

/// Why the node is not ready, in the kubelet's order; empty when it is.
pub fn ready_errors(
    runtime: Option<&RuntimeHealth>,
    health: &[String],
    now: Instant,
    down_after: Duration,
    node: &Node,
) -> Vec<String> {
    let mut errors = Vec::new();
    match runtime {
        None => {
            errors.push("container runtime status check may not have completed yet".to_owned());
            errors.extend(health.iter().cloned());
            errors.push("network state unknown".to_owned());
        }
        Some(runtime) => {
            match runtime.last_successful_probe {
                None => errors
                    .push("container runtime status check may not have completed yet".to_owned()),
                // A simulated runtime is reported once and never goes down.
                Some(at)
                    if !runtime.simulated && now.saturating_duration_since(at) >= down_after =>
                {
                    errors.push("container runtime is down".to_owned());
                }
                Some(_) => {}
            }
            // The kubelet's health checks come between the staleness and the runtime's error.
            errors.extend(health.iter().cloned());
            errors.extend(runtime.runtime_error.clone());
            errors.extend(runtime.network_error.clone());
        }
    }
    let capacity = node
        .status
        .as_ref()
        .and_then(|status| status.capacity.as_ref());
    let missing: Vec<&str> = ["cpu", "memory", "pods", "ephemeral-storage"]
        .into_iter()
        .filter(|resource| !capacity.is_some_and(|capacity| capacity.contains_key(*resource)))
        .collect();
    if !missing.is_empty() {
        errors.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    let mut unique = Vec::new();
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    unique
}

pub(super) fn set_ready(
    inputs: &StatusInputs<'_>,
    now: Timestamp,
    node: &mut Node,
) -> Vec<NodeEvent> {
    let errors = ready_errors(
        inputs.runtime,
        inputs.health,
        inputs.now_instant,
        inputs.settings.runtime_down_after,
        node,
    );
    let (status, reason, message) = match errors.as_slice() {
        [] => (
            "True",
            "KubeletReady",
            "kubelet is posting ready status".to_owned(),
        ),
        [only] => ("False", "KubeletNotReady", only.clone()),
        several => (
            "False",
            "KubeletNotReady",
            format!("[{}]", several.join(", ")),
        ),
    };
    let mut ready = NodeCondition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    let list = conditions(node);
    match list.iter_mut().find(|condition| condition.type_ == "Ready") {
        None => {
            list.push(ready);
            Vec::new()
        }
        Some(existing) => {
            let changed = existing.status != ready.status;
            if !changed {
                ready.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = ready;
            if !changed {
                return Vec::new();
            }
            let event = if status == "True" {
                "NodeReady"
            } else {
                "NodeNotReady"
            };
            vec![NodeEvent::normal(
                event,
                format!("Node {} status is now: {event}", inputs.node_name),
            )]
        }
    }
}
