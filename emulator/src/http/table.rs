//! Server-side printing: the `meta.k8s.io/v1` `Table` kubectl asks for with
//! `Accept: application/json;as=Table;...`, with the columns kube-apiserver's printers give
//! Nodes, Pods, Leases, Namespaces and Events (so `kubectl get nodes` shows STATUS and VERSION).

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::api::{ApiResource, StoredKind};
use crate::time::parse_time;

/// Whether the `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// A Table of `objects` (stored form), consistent at `resource_version`.
pub fn table(
    resource: &ApiResource,
    objects: &[&Value],
    resource_version: &str,
    now: SystemTime,
) -> Value {
    let columns: Vec<Value> = columns(resource.stored)
        .iter()
        .map(|(name, kind, priority)| {
            let format = if *name == "Name" { "name" } else { "" };
            json!({"name": name, "type": kind, "format": format, "description": "", "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let metadata = o.get("metadata").cloned().unwrap_or_else(|| json!({}));
            json!({"cells": cells(resource.stored, o, now),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns, "rows": rows})
}

fn columns(kind: StoredKind) -> &'static [(&'static str, &'static str, u8)] {
    match kind {
        StoredKind::Node => &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        StoredKind::Pod => &[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("Node", "string", 1),
        ],
        StoredKind::Lease => &[
            ("Name", "string", 0),
            ("Holder", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::Namespace => &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::ConfigMap => &[
            ("Name", "string", 0),
            ("Data", "integer", 0),
            ("Age", "string", 0),
        ],
        StoredKind::Secret => &[
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Data", "integer", 0),
            ("Age", "string", 0),
        ],
        StoredKind::CertificateSigningRequest => &[
            ("Name", "string", 0),
            ("Age", "string", 0),
            ("SignerName", "string", 0),
            ("Requestor", "string", 0),
            ("RequestedDuration", "string", 0),
            ("Condition", "string", 0),
        ],
        StoredKind::ServiceAccount => &[
            ("Name", "string", 0),
            ("Secrets", "integer", 0),
            ("Age", "string", 0),
        ],
        StoredKind::Service => &[
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::Event => &[
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ],
        StoredKind::PersistentVolume => &[
            ("Name", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("Reclaim Policy", "string", 0),
            ("Status", "string", 0),
            ("Claim", "string", 0),
            ("StorageClass", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::PersistentVolumeClaim => &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::CsiDriver => &[
            ("Name", "string", 0),
            ("AttachRequired", "boolean", 0),
            ("PodInfoOnMount", "boolean", 0),
            ("Age", "string", 0),
        ],
        StoredKind::RuntimeClass => &[
            ("Name", "string", 0),
            ("Handler", "string", 0),
            ("Age", "string", 0),
        ],
        StoredKind::CsiNode => &[
            ("Name", "string", 0),
            ("Drivers", "integer", 0),
            ("Age", "string", 0),
        ],
        StoredKind::VolumeAttachment => &[
            ("Name", "string", 0),
            ("Attacher", "string", 0),
            ("PV", "string", 0),
            ("Node", "string", 0),
            ("Attached", "boolean", 0),
            ("Age", "string", 0),
        ],
    }
}

fn cells(kind: StoredKind, o: &Value, now: SystemTime) -> Vec<Value> {
    let s = |pointer: &str| {
        o.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let name = s("/metadata/name");
    let age = age(
        o.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    );
    let strings: Vec<String> = match kind {
        StoredKind::Node => {
            let ready = condition(o, "Ready");
            let mut status = match ready.as_deref() {
                Some("True") => "Ready".to_string(),
                Some("Unknown") | None => "Unknown".to_string(),
                Some(_) => "NotReady".to_string(),
            };
            if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let mut roles: Vec<&str> = o
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .collect()
                })
                .unwrap_or_default();
            roles.sort_unstable();
            let roles = if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            };
            let internal_ip = o
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
                .and_then(|x| x["address"].as_str())
                .unwrap_or("<none>")
                .to_string();
            vec![
                name,
                status,
                roles,
                age,
                s("/status/nodeInfo/kubeletVersion"),
                internal_ip,
                s("/status/nodeInfo/osImage"),
                s("/status/nodeInfo/kernelVersion"),
                s("/status/nodeInfo/containerRuntimeVersion"),
            ]
        }
        StoredKind::Pod => {
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = statuses.iter().filter(|c| c["ready"] == true).count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c["restartCount"].as_i64())
                .sum();
            let status = if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                s("/status/phase")
            };
            vec![
                name,
                format!("{ready}/{total}"),
                status,
                restarts.to_string(),
                age,
                s("/spec/nodeName"),
            ]
        }
        StoredKind::Lease => vec![name, s("/spec/holderIdentity"), age],
        StoredKind::Namespace => vec![name, s("/status/phase"), age],
        StoredKind::ConfigMap => {
            let count = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            };
            let data = count("/data") + count("/binaryData");
            vec![name, data.to_string(), age]
        }
        StoredKind::Secret => {
            let data = o
                .pointer("/data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            vec![name, s("/type"), data.to_string(), age]
        }
        StoredKind::Service => {
            let ports: Vec<String> = (o.pointer("/spec/ports").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .map(|port| {
                    let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
                    let protocol = port
                        .get("protocol")
                        .and_then(Value::as_str)
                        .unwrap_or("TCP");
                    format!("{number}/{protocol}")
                })
                .collect();
            let ports = if ports.is_empty() {
                "<none>".to_owned()
            } else {
                ports.join(",")
            };
            vec![
                name,
                s("/spec/type"),
                s("/spec/clusterIP"),
                "<none>".to_owned(),
                ports,
                age,
            ]
        }
        StoredKind::CertificateSigningRequest => {
            let duration = o
                .pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .map_or_else(|| "<none>".to_string(), |s| format!("{s}s"));
            let conditions: Vec<&str> = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("type").and_then(Value::as_str))
                .collect();
            let mut condition = if conditions.is_empty() {
                "Pending".to_string()
            } else {
                conditions.join(",")
            };
            if o.pointer("/status/certificate")
                .is_some_and(|c| c.as_str() != Some(""))
            {
                condition.push_str(",Issued");
            }
            vec![
                name,
                age,
                s("/spec/signerName"),
                s("/spec/username"),
                duration,
                condition,
            ]
        }
        StoredKind::ServiceAccount => {
            let secrets = o
                .pointer("/secrets")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            vec![name, secrets.to_string(), age]
        }
        StoredKind::Event => {
            let last = o
                .pointer("/lastTimestamp")
                .or_else(|| o.pointer("/eventTime"))
                .and_then(Value::as_str);
            let object = format!(
                "{}/{}",
                s("/involvedObject/kind").to_lowercase(),
                s("/involvedObject/name")
            );
            vec![
                self::age(last, now),
                s("/type"),
                s("/reason"),
                object,
                s("/message"),
            ]
        }
        StoredKind::PersistentVolume => {
            let claim = if s("/spec/claimRef/name").is_empty() {
                String::new()
            } else {
                format!(
                    "{}/{}",
                    s("/spec/claimRef/namespace"),
                    s("/spec/claimRef/name")
                )
            };
            vec![
                name,
                s("/spec/capacity/storage"),
                access_modes(o.pointer("/spec/accessModes")),
                s("/spec/persistentVolumeReclaimPolicy"),
                s("/status/phase"),
                claim,
                s("/spec/storageClassName"),
                age,
            ]
        }
        StoredKind::PersistentVolumeClaim => vec![
            name,
            s("/status/phase"),
            s("/spec/volumeName"),
            s("/status/capacity/storage"),
            access_modes(o.pointer("/status/accessModes")),
            s("/spec/storageClassName"),
            age,
        ],
        StoredKind::CsiDriver => vec![
            name,
            flag(o.pointer("/spec/attachRequired")),
            flag(o.pointer("/spec/podInfoOnMount")),
            age,
        ],
        StoredKind::RuntimeClass => vec![name, s("/handler"), age],
        StoredKind::CsiNode => {
            let drivers = o
                .pointer("/spec/drivers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            vec![name, drivers.to_string(), age]
        }
        StoredKind::VolumeAttachment => vec![
            name,
            s("/spec/attacher"),
            s("/spec/source/persistentVolumeName"),
            s("/spec/nodeName"),
            flag(o.pointer("/status/attached")),
            age,
        ],
    };
    strings.into_iter().map(Value::String).collect()
}

/// kubectl's short access modes: `RWO,ROX`.
fn access_modes(modes: Option<&Value>) -> String {
    let short: Vec<&str> = modes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|mode| match mode {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect();
    short.join(",")
}

fn flag(value: Option<&Value>) -> String {
    value.and_then(Value::as_bool).unwrap_or(false).to_string()
}

fn condition(o: &Value, kind: &str) -> Option<String> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?
        .get("status")?
        .as_str()
        .map(str::to_string)
}

fn age(timestamp: Option<&str>, now: SystemTime) -> String {
    match timestamp
        .and_then(parse_time)
        .and_then(|t| now.duration_since(t).ok())
    {
        Some(d) => human_duration(d.as_secs()),
        None => "<unknown>".to_string(),
    }
}

/// apimachinery's `duration.HumanDuration`.
pub fn human_duration(seconds: u64) -> String {
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    match () {
        () if seconds < 120 => format!("{seconds}s"),
        () if minutes < 10 && seconds.is_multiple_of(60) => format!("{minutes}m"),
        () if minutes < 10 => format!("{minutes}m{}s", seconds % 60),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 && minutes.is_multiple_of(60) => format!("{hours}h"),
        () if hours < 8 => format!("{hours}h{}m", minutes % 60),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 192 && hours.is_multiple_of(24) => format!("{}d", hours / 24),
        () if hours < 192 => format!("{}d{}h", hours / 24, hours % 24),
        () if hours < 24 * 365 * 2 => format!("{}d", hours / 24),
        () if hours < 24 * 365 * 8 && (hours / 24).is_multiple_of(365) => {
            format!("{}y", hours / 24 / 365)
        }
        () if hours < 24 * 365 * 8 => format!("{}y{}d", hours / 24 / 365, (hours / 24) % 365),
        () => format!("{}y", hours / 24 / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resource::NODES;

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86_400 + 3600), "3d1h");
    }

    #[test]
    fn node_rows_show_status_roles_and_version() {
        let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.36.0"}}});
        let t = table(&NODES, &[&node], "7", SystemTime::now());
        assert_eq!(t["rows"][0]["cells"][1], "Ready,SchedulingDisabled");
        assert_eq!(t["rows"][0]["cells"][2], "worker");
        assert_eq!(t["rows"][0]["cells"][4], "v1.36.0");
        assert_eq!(t["columnDefinitions"][1]["name"], "Status");
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
