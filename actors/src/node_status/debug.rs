//! What `GET /debug/node` shows: the status as last computed and as last sent, when each
//! status field last changed, and for each condition the inputs that decided it — so a person
//! can see why a node is NotReady.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::setters::{StatusSettings, ready_errors};
use crate::messages::{NodeVolumeFacts, PressureChanged, RuntimeHealth};

pub struct DebugView<'a> {
    pub node_name: &'a str,
    pub registered: Option<&'a Node>,
    pub last_computed: Option<&'a Node>,
    pub last_sent: Option<&'a (Timestamp, String)>,
    pub last_sync: Option<&'a (Timestamp, String)>,
    pub field_changed_at: &'a BTreeMap<String, Timestamp>,
    pub remembered_runtime: Option<RuntimeHealth>,
    pub remembered_pressure: Option<PressureChanged>,
    /// From the volume manager; `None` until its reconciler synced.
    pub volumes_in_use: Option<Vec<String>>,
    /// Last handed to the volume manager.
    pub volume_facts: Option<NodeVolumeFacts>,
    pub last_report: Option<Instant>,
    pub status: &'a StatusSettings,
    /// The unhealthy health checks now.
    pub health: Vec<String>,
}

fn runtime_json(runtime: Option<&RuntimeHealth>) -> Value {
    match runtime {
        None => json!({ "heard": false, "note": "no RuntimeHealth received yet" }),
        Some(runtime) => json!({
            "heard": true,
            "simulated": runtime.simulated,
            "observedAt": runtime.observed_at.to_string(),
            "lastSuccessfulProbeSecondsAgo": runtime.last_successful_probe.map(|at| at.elapsed().as_secs_f64()),
            "runtimeError": runtime.runtime_error,
            "networkError": runtime.network_error,
            "runtimeVersion": runtime.runtime_version,
        }),
    }
}

fn pressure_json(pressure: Option<&PressureChanged>) -> Value {
    match pressure {
        None => {
            json!({ "heard": false, "note": "no PressureChanged received yet: no pressure assumed" })
        }
        Some(pressure) => json!({
            "heard": true,
            "memoryPressure": pressure.memory_pressure,
            "diskPressure": pressure.disk_pressure,
            "pidPressure": pressure.pid_pressure,
            "signals": pressure.signals.iter().map(|signal| json!({
                "signal": signal.signal,
                "available": signal.available,
                "capacity": signal.capacity,
                "threshold": signal.threshold,
                "observedAt": signal.observed_at.to_string(),
                "thresholdMetSince": signal.threshold_met_since.map(|at| at.to_string()),
            })).collect::<Vec<_>>(),
        }),
    }
}

pub fn describe(view: DebugView<'_>) -> Value {
    let runtime = view.remembered_runtime.as_ref();
    let pressure = view.remembered_pressure.as_ref();
    let conditions: Vec<Value> = view
        .last_computed
        .and_then(|node| node.status.as_ref())
        .and_then(|status| status.conditions.as_ref())
        .map(|conditions| {
            conditions
                .iter()
                .map(|condition| {
                    let decided_by = match condition.type_.as_str() {
                        "Ready" => json!({
                            "errors": view.last_computed.map(|node| ready_errors(runtime, &view.health, Instant::now(), view.status.runtime_down_after, node)).unwrap_or_default(),
                            "runtime": runtime_json(runtime),
                            "healthChecks": view.health,
                        }),
                        "MemoryPressure" => json!({ "memoryPressure": pressure.map(|p| p.memory_pressure), "from": "EvictionSignalActor" }),
                        "DiskPressure" => json!({ "diskPressure": pressure.map(|p| p.disk_pressure), "from": "EvictionSignalActor" }),
                        "PIDPressure" => json!({ "pidPressure": pressure.map(|p| p.pid_pressure), "from": "EvictionSignalActor" }),
                        _ => Value::Null,
                    };
                    json!({
                        "type": condition.type_,
                        "status": condition.status,
                        "reason": condition.reason,
                        "message": condition.message,
                        "lastTransitionTime": condition.last_transition_time.as_ref().map(|time| time.0.to_string()),
                        "decidedBy": decided_by,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "node": view.node_name,
        "registered": view.registered.map(|node| json!({
            "uid": node.metadata.uid,
            "resourceVersion": node.metadata.resource_version,
        })),
        "lastSync": view.last_sync.map(|(at, result)| json!({ "at": at.to_string(), "result": result })),
        "lastReportSecondsAgo": view.last_report.map(|at| at.elapsed().as_secs_f64()),
        "conditions": conditions,
        "inputs": { "runtime": runtime_json(runtime), "pressure": pressure_json(pressure), "settings": format!("{:?}", view.status) },
        "lastComputed": view.last_computed.map(|node| serde_json::to_value(&node.status).unwrap_or(Value::Null)),
        "lastSent": view.last_sent.map(|(at, patch)| json!({ "at": at.to_string(), "patch": serde_json::from_str::<Value>(patch).unwrap_or(Value::Null) })),
        "volumes": json!({
            "volumesInUse": match &view.volumes_in_use {
                None => json!({"reported": false, "why": "the volume manager's reconciler has not synced since start (or no volume manager runs): the field is left as found"}),
                Some(list) => json!({"reported": true, "list": list, "why": "attachable volumes the pods want or that are still mounted, from the volume manager"}),
            },
            "volumesAttached": view.registered.and_then(|node| node.status.as_ref()).and_then(|s| s.volumes_attached.as_ref()).map(|attached| attached.iter().map(|v| json!({"name": v.name, "devicePath": v.device_path})).collect::<Vec<_>>()).unwrap_or_default(),
            "volumesAttachedWhy": "written by the attach/detach controller; read back from the Node and handed to the volume manager, which mounts an attachable volume only once it is listed",
            "handedToVolumeManager": view.volume_facts.as_ref().map(|facts| &facts.volumes_attached),
        }),
        "fieldChangedAt": view.field_changed_at.iter().map(|(field, at)| (field.clone(), json!(at.to_string()))).collect::<serde_json::Map<_, _>>(),
    })
}
