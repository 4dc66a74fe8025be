//! kube-controller-manager's attach/detach controller for CSI volumes, and the external
//! attacher a CSI driver deploys, as one pure planning step over the stored objects: which
//! VolumeAttachments to create (`csi-<sha256(handle+driver+node)>`, for attachable volumes of
//! pods bound to managed nodes), which node's `status.volumesAttached` to rewrite, and which
//! attachments to delete — only once the volume left the node's `volumesInUse`, and after the
//! node stopped listing it, as the controller's reconciler orders it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The Node annotation a kubelet sets to let the controller attach and detach for it.
pub const CONTROLLER_MANAGED_ANNOTATION: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// What the stored objects are now, and what the controller remembers creating.
pub struct World<'a> {
    pub pods: &'a [Value],
    pub claims: &'a [Value],
    pub volumes: &'a [Value],
    pub csi_drivers: &'a [Value],
    pub csi_nodes: &'a [Value],
    pub nodes: &'a [Value],
    pub attachments: &'a [Value],
    /// Attachments this controller created (its actual state's "attach started").
    pub created: &'a BTreeSet<String>,
    /// Whether to play the drivers' external attachers too.
    pub attacher: bool,
}

/// One write the controller (or the emulated attacher) makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CreateAttachment {
        name: String,
        driver: String,
        node: String,
        pv: String,
    },
    /// `status.volumesAttached` of `node` becomes `volumes` (each `{name, devicePath}`).
    SetVolumesAttached {
        node: String,
        volumes: Vec<Value>,
    },
    DeleteAttachment {
        name: String,
    },
    /// The attacher reports the volume attached.
    MarkAttached {
        name: String,
    },
    /// The attacher cannot attach: `status.attachError.message`.
    SetAttachError {
        name: String,
        message: String,
    },
}

/// A CSI volume a pod on a node needs attached.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Wanted {
    node: String,
    pv: String,
    driver: String,
    handle: String,
}

/// Lowercase hex SHA-256, as Go's `%x` of `sha256.Sum256`.
fn sha256_hex(input: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, input.as_bytes())
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The csi attacher's VolumeAttachment name for a volume on a node.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    format!("csi-{}", sha256_hex(&format!("{handle}{driver}{node}")))
}

/// The volume's name in `volumesInUse` and `volumesAttached`.
pub fn unique_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn by_name(objects: &[Value]) -> BTreeMap<&str, &Value> {
    objects
        .iter()
        .map(|object| (text(object, "/metadata/name"), object))
        .collect()
}

/// The PV's CSI driver and handle, when it is a CSI volume.
fn csi_source(pv: &Value) -> Option<(String, String)> {
    let csi = pv.pointer("/spec/csi")?;
    Some((
        text(csi, "/driver").to_owned(),
        text(csi, "/volumeHandle").to_owned(),
    ))
}

/// Attachable unless the CSIDriver object says `attachRequired: false` (a missing object means
/// attach, as the csi plugin's `CanAttach` decides).
fn attach_required(drivers: &BTreeMap<&str, &Value>, driver: &str) -> bool {
    drivers
        .get(driver)
        .and_then(|object| object.pointer("/spec/attachRequired"))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

fn managed(node: &Value) -> bool {
    node.pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(CONTROLLER_MANAGED_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// The desired state: attachable CSI volumes of the running pods bound to managed nodes.
fn wanted(world: &World<'_>, nodes: &BTreeMap<&str, &Value>) -> BTreeSet<Wanted> {
    let volumes = by_name(world.volumes);
    let drivers = by_name(world.csi_drivers);
    let claims: BTreeMap<(&str, &str), &Value> = world
        .claims
        .iter()
        .map(|claim| {
            (
                (
                    text(claim, "/metadata/namespace"),
                    text(claim, "/metadata/name"),
                ),
                claim,
            )
        })
        .collect();
    let mut wanted = BTreeSet::new();
    for pod in world.pods {
        let node = text(pod, "/spec/nodeName");
        let phase = text(pod, "/status/phase");
        if node.is_empty() || matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        if !nodes.get(node).is_some_and(|node| managed(node)) {
            continue;
        }
        let namespace = text(pod, "/metadata/namespace");
        let pod_volumes = pod.pointer("/spec/volumes").and_then(Value::as_array);
        for volume in pod_volumes.into_iter().flatten() {
            let claim_name = text(volume, "/persistentVolumeClaim/claimName");
            let Some(claim) = claims.get(&(namespace, claim_name)) else {
                continue;
            };
            let pv_name = text(claim, "/spec/volumeName");
            if text(claim, "/status/phase") != "Bound" || pv_name.is_empty() {
                continue;
            }
            let Some((driver, handle)) = volumes.get(pv_name).and_then(|pv| csi_source(pv)) else {
                continue;
            };
            if attach_required(&drivers, &driver) {
                wanted.insert(Wanted {
                    node: node.to_owned(),
                    pv: pv_name.to_owned(),
                    driver,
                    handle,
                });
            }
        }
    }
    wanted
}

/// The names listed in a node's `status.<field>` (`volumesInUse` strings or
/// `volumesAttached[].name`).
fn listed(node: &Value, field: &str) -> BTreeSet<String> {
    node.pointer(&format!("/status/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            entry
                .as_str()
                .or_else(|| entry.get("name").and_then(Value::as_str))
        })
        .map(str::to_owned)
        .collect()
}

/// Every write the stored objects call for, in the order to make them.
pub fn plan(world: &World<'_>) -> Vec<Action> {
    let nodes = by_name(world.nodes);
    let volumes = by_name(world.volumes);
    let wanted = wanted(world, &nodes);
    let attachments = by_name(world.attachments);
    let mut actions = Vec::new();
    let mut wanted_names = BTreeSet::new();
    for volume in &wanted {
        let name = attachment_name(&volume.handle, &volume.driver, &volume.node);
        if !attachments.contains_key(name.as_str()) {
            actions.push(Action::CreateAttachment {
                name: name.clone(),
                driver: volume.driver.clone(),
                node: volume.node.clone(),
                pv: volume.pv.clone(),
            });
        }
        wanted_names.insert(name);
    }
    let mut deletions = Vec::new();
    for (node_name, node) in &nodes {
        let in_use = listed(node, "volumesInUse");
        let reported = listed(node, "volumesAttached");
        let mut attached = Vec::new();
        for (name, attachment) in &attachments {
            if text(attachment, "/spec/nodeName") != *node_name {
                continue;
            }
            let pv = text(attachment, "/spec/source/persistentVolumeName");
            let Some((driver, handle)) = volumes.get(pv).and_then(|pv| csi_source(pv)) else {
                continue;
            };
            let unique = unique_name(&driver, &handle);
            let ours = wanted_names.contains(*name)
                || world.created.contains(*name)
                || reported.contains(&unique);
            if !ours {
                continue;
            }
            let is_attached = attachment
                .pointer("/status/attached")
                .and_then(Value::as_bool)
                == Some(true);
            if wanted_names.contains(*name) || in_use.contains(&unique) {
                if is_attached {
                    attached.push(json!({"name": unique, "devicePath": ""}));
                }
            } else {
                // Not wanted and no longer in use: the node stops listing it, then it goes.
                deletions.push(Action::DeleteAttachment {
                    name: (*name).to_owned(),
                });
            }
        }
        attached.sort_by(|a, b| text(a, "/name").cmp(text(b, "/name")));
        let current: Vec<Value> = node
            .pointer("/status/volumesAttached")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if attached != current && (managed(node) || !current.is_empty()) {
            actions.push(Action::SetVolumesAttached {
                node: (*node_name).to_owned(),
                volumes: attached,
            });
        }
    }
    actions.extend(deletions);
    if world.attacher {
        actions.extend(attacher_plan(world, &attachments));
    }
    actions
}

/// The external attachers of the drivers that have a CSIDriver object: an attachment is
/// attached once the node's CSINode lists the driver with a node ID (which ControllerPublish
/// needs), and otherwise carries the external-attacher's error.
fn attacher_plan(world: &World<'_>, attachments: &BTreeMap<&str, &Value>) -> Vec<Action> {
    let drivers = by_name(world.csi_drivers);
    let csi_nodes = by_name(world.csi_nodes);
    let mut actions = Vec::new();
    for (name, attachment) in attachments {
        let driver = text(attachment, "/spec/attacher");
        let attached = attachment
            .pointer("/status/attached")
            .and_then(Value::as_bool)
            == Some(true);
        let deleting = attachment.pointer("/metadata/deletionTimestamp").is_some();
        if attached || deleting || !drivers.contains_key(driver) {
            continue;
        }
        let node = text(attachment, "/spec/nodeName");
        let has_node_id = csi_nodes
            .get(node)
            .and_then(|csi_node| csi_node.pointer("/spec/drivers"))
            .and_then(Value::as_array)
            .is_some_and(|entries| {
                entries.iter().any(|entry| {
                    text(entry, "/name") == driver && !text(entry, "/nodeID").is_empty()
                })
            });
        if has_node_id {
            actions.push(Action::MarkAttached {
                name: (*name).to_owned(),
            });
        } else {
            let message = format!("CSINode {node} does not contain driver {driver}");
            if text(attachment, "/status/attachError/message") != message {
                actions.push(Action::SetAttachError {
                    name: (*name).to_owned(),
                    message,
                });
            }
        }
    }
    actions
}

#[cfg(test)]
#[path = "attach_detach_tests.rs"]
mod tests;
