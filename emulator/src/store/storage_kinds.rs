//! kube-apiserver's create defaulting and validation for the storage kinds the volume tests use:
//! PersistentVolume and PersistentVolumeClaim (core v1), CSIDriver, CSINode and
//! VolumeAttachment (storage.k8s.io/v1). Only the rules and texts those tests touch; pure
//! functions over JSON objects, called by the store's strategy.

use serde_json::{Map, Value, json};

use super::strategy::object_entry;
use crate::api::{FieldError, StoredKind};

/// Defaulting and `PrepareForCreate` of a new storage object.
pub fn prepare(kind: StoredKind, object: &mut Map<String, Value>) {
    match kind {
        StoredKind::PersistentVolume => {
            let spec = object_entry(object, "spec");
            spec.entry("persistentVolumeReclaimPolicy")
                .or_insert(json!("Retain"));
            spec.entry("volumeMode").or_insert(json!("Filesystem"));
            object.insert("status".into(), json!({"phase": "Pending"}));
        }
        StoredKind::PersistentVolumeClaim => {
            object_entry(object, "spec")
                .entry("volumeMode")
                .or_insert(json!("Filesystem"));
            object.insert("status".into(), json!({"phase": "Pending"}));
        }
        StoredKind::CsiDriver => {
            let spec = object_entry(object, "spec");
            for (field, default) in [
                ("attachRequired", json!(true)),
                ("podInfoOnMount", json!(false)),
                ("requiresRepublish", json!(false)),
                ("storageCapacity", json!(false)),
                ("seLinuxMount", json!(false)),
                ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
                ("volumeLifecycleModes", json!(["Persistent"])),
            ] {
                spec.entry(field).or_insert(default);
            }
        }
        StoredKind::VolumeAttachment => {
            // A new attachment starts unattached whatever the creator sent (status is the
            // attacher's, through /status); Go always writes `attached`.
            object.insert("status".into(), json!({"attached": false}));
        }
        _ => {}
    }
}

/// Validation on create and update (the kinds' `Validate*` functions, the parts the tests use).
pub fn validate(kind: StoredKind, object: &Value, errors: &mut Vec<FieldError>) {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let missing = |pointer: &str| object.pointer(pointer).is_none_or(Value::is_null);
    match kind {
        StoredKind::PersistentVolume => {
            if object
                .pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                errors.push(FieldError::required("spec.accessModes", ""));
            }
            if missing("/spec/capacity") {
                errors.push(FieldError::required("spec.capacity", ""));
            }
            if object.pointer("/spec/csi").is_some() {
                if text("/spec/csi/driver").is_empty() {
                    errors.push(FieldError::required("spec.csi.driver", ""));
                }
                if text("/spec/csi/volumeHandle").is_empty() {
                    errors.push(FieldError::required("spec.csi.volumeHandle", ""));
                }
            } else if !has_other_source(object) {
                errors.push(FieldError::required("spec", "must specify a volume type"));
            }
        }
        StoredKind::PersistentVolumeClaim => {
            if object
                .pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                errors.push(FieldError::required(
                    "spec.accessModes",
                    "at least 1 access mode is required",
                ));
            }
            if missing("/spec/resources/requests/storage") {
                errors.push(FieldError::required("spec.resources[storage]", ""));
            }
        }
        StoredKind::CsiNode => {
            let drivers = object
                .pointer("/spec/drivers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (index, driver) in drivers.iter().enumerate() {
                for field in ["name", "nodeID"] {
                    if driver
                        .get(field)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .is_empty()
                    {
                        errors.push(FieldError::required(
                            &format!("spec.drivers[{index}].{field}"),
                            "",
                        ));
                    }
                }
            }
        }
        StoredKind::VolumeAttachment => {
            if text("/spec/attacher").is_empty() {
                errors.push(FieldError::required("spec.attacher", ""));
            }
            if text("/spec/nodeName").is_empty() {
                errors.push(FieldError::required("spec.nodeName", ""));
            }
            let pv = !text("/spec/source/persistentVolumeName").is_empty();
            let inline = !missing("/spec/source/inlineVolumeSpec");
            if pv == inline {
                errors.push(FieldError::required(
                    "spec.source",
                    "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ));
            }
        }
        _ => {}
    }
}

/// Whether a PV names a source other than `csi` (kept as sent; nodepulse mounts only CSI).
fn has_other_source(object: &Value) -> bool {
    object
        .get("spec")
        .and_then(Value::as_object)
        .is_some_and(|spec| {
            ["hostPath", "local", "nfs", "iscsi", "fc", "cephfs", "rbd"]
                .iter()
                .any(|source| spec.contains_key(*source))
        })
}

#[cfg(test)]
#[path = "storage_kinds_tests.rs"]
mod tests;
