//! kube-apiserver's create defaulting and validation for the storage kinds the volume tests use:
//! PersistentVolume and PersistentVolumeClaim (core v1), CSIDriver, CSINode and
//! VolumeAttachment (storage.k8s.io/v1): required fields, CSI driver names, a VolumeAttachment's
//! immutable spec. Only the rules and texts those tests touch; pure functions over JSON
//! objects, called by the store's strategy.

use serde_json::{Map, Value, json};

use nodepulse_validation::names::dns1123_subdomain_problems;

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
                csi_driver_name(text("/spec/csi/driver"), "spec.csi.driver", errors);
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
                let field = |name: &str| driver.get(name).and_then(Value::as_str).unwrap_or("");
                csi_driver_name(
                    field("name"),
                    &format!("spec.drivers[{index}].name"),
                    errors,
                );
                if field("nodeID").is_empty() {
                    errors.push(FieldError::required(
                        &format!("spec.drivers[{index}].nodeID"),
                        "",
                    ));
                }
            }
        }
        StoredKind::VolumeAttachment => {
            csi_driver_name(text("/spec/attacher"), "spec.attacher", errors);
            let pv = !text("/spec/source/persistentVolumeName").is_empty();
            let inline = !missing("/spec/source/inlineVolumeSpec");
            if pv == inline {
                errors.push(FieldError::required(
                    "spec.source",
                    "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ));
            }
            // `ValidateNodeName`: a DNS subdomain, so an empty name is invalid, not required.
            let node = text("/spec/nodeName");
            for problem in dns1123_subdomain_problems(node) {
                errors.push(FieldError::invalid("spec.nodeName", &json!(node), problem));
            }
        }
        _ => {}
    }
}

/// `ValidateVolumeAttachmentUpdate` beyond what [`validate`] checks: the spec never changes.
pub fn validate_update(kind: StoredKind, old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    if kind == StoredKind::VolumeAttachment && old.get("spec") != new.get("spec") {
        let spec = new.get("spec").cloned().unwrap_or_else(|| json!({}));
        errors.push(FieldError::invalid_shown(
            "spec",
            &internal_attachment_spec(&spec),
            "field is immutable",
        ));
    }
}

/// The spec as kube-apiserver prints the bad value: `json.Marshal` of the internal
/// `storage.VolumeAttachmentSpec`, whose fields have no JSON tags (Go names, declaration
/// order). An inline volume spec is shown in its v1 form.
fn internal_attachment_spec(spec: &Value) -> String {
    let text = |pointer: &str| json!(spec.pointer(pointer).and_then(Value::as_str).unwrap_or(""));
    let volume = spec
        .pointer("/source/persistentVolumeName")
        .cloned()
        .unwrap_or(Value::Null);
    let inline = spec
        .pointer("/source/inlineVolumeSpec")
        .cloned()
        .unwrap_or(Value::Null);
    format!(
        "{{\"Attacher\":{},\"Source\":{{\"PersistentVolumeName\":{volume},\"InlineVolumeSpec\":{inline}}},\"NodeName\":{}}}",
        text("/attacher"),
        text("/nodeName"),
    )
}

/// `ValidateCSIDriverName`: required, at most 63 bytes, and a DNS subdomain once lowercased
/// (the bad value shown as given).
fn csi_driver_name(name: &str, field: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(FieldError::required(field, ""));
        return;
    }
    if name.len() > 63 {
        errors.push(FieldError::too_long(field, 63));
    }
    for problem in dns1123_subdomain_problems(&name.to_lowercase()) {
        errors.push(FieldError::invalid(field, &json!(name), problem));
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
