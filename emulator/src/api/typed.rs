//! The typed decode every write goes through in kube-apiserver: a body whose fields do not fit
//! the kind's Go types (a string where an int32 goes, an object where a list goes) is refused
//! before any strategy or validation runs. The k8s-openapi types stand in for the Go ones;
//! like Go's decoder they ignore unknown fields. Pods, Events and the storage kinds are stored
//! as their typed object serialises (fields the type lacks are gone, times in UTC); other kinds
//! as sent.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ApiError, ApiResource, FieldError, StoredKind};

/// Why `object` does not decode as the kind `resource` serves, if it does not.
fn decode_error(resource: &ApiResource, object: &Value) -> Option<String> {
    fn check<T: DeserializeOwned>(object: &Value) -> Option<String> {
        serde_json::from_value::<T>(object.clone())
            .err()
            .map(|e| e.to_string())
    }
    use k8s_openapi::api::{certificates, coordination, core, events, node, storage};
    match (resource.stored, resource.group) {
        (StoredKind::Namespace, _) => check::<core::v1::Namespace>(object),
        (StoredKind::Node, _) => check::<core::v1::Node>(object),
        (StoredKind::Pod, _) => check::<core::v1::Pod>(object),
        (StoredKind::Lease, _) => check::<coordination::v1::Lease>(object),
        (StoredKind::Event, "events.k8s.io") => check::<events::v1::Event>(object),
        (StoredKind::Event, _) => check::<core::v1::Event>(object),
        (StoredKind::PersistentVolume, _) => check::<core::v1::PersistentVolume>(object),
        (StoredKind::PersistentVolumeClaim, _) => check::<core::v1::PersistentVolumeClaim>(object),
        (StoredKind::CsiDriver, _) => check::<storage::v1::CSIDriver>(object),
        (StoredKind::CsiNode, _) => check::<storage::v1::CSINode>(object),
        (StoredKind::RuntimeClass, _) => check::<node::v1::RuntimeClass>(object),
        (StoredKind::VolumeAttachment, _) => check::<storage::v1::VolumeAttachment>(object),
        (StoredKind::ConfigMap, _) => check::<core::v1::ConfigMap>(object),
        (StoredKind::Secret, _) => check::<core::v1::Secret>(object),
        (StoredKind::ServiceAccount, _) => check::<core::v1::ServiceAccount>(object),
        (StoredKind::Service, _) => check::<core::v1::Service>(object),
        (StoredKind::CertificateSigningRequest, _) => {
            check::<certificates::v1::CertificateSigningRequest>(object)
        }
    }
}

/// `object` as its typed form serialises it, for the kinds stored from the typed object (Pods,
/// Events in their stored core form):
/// what a client reads back has only the fields the type has. Left as it is when it does not
/// decode (the handlers refused such a body already).
pub fn round_trip(kind: StoredKind, object: &mut Value) {
    fn through<T: DeserializeOwned + serde::Serialize>(object: &mut Value) {
        let typed = serde_json::from_value::<T>(object.clone()).ok();
        if let Some(value) = typed.and_then(|t| serde_json::to_value(t).ok()) {
            *object = value;
        }
    }
    match kind {
        StoredKind::Pod => through::<k8s_openapi::api::core::v1::Pod>(object),
        StoredKind::Event => through::<k8s_openapi::api::core::v1::Event>(object),
        StoredKind::PersistentVolume => {
            through::<k8s_openapi::api::core::v1::PersistentVolume>(object);
        }
        StoredKind::PersistentVolumeClaim => {
            through::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(object);
        }
        StoredKind::CsiDriver => through::<k8s_openapi::api::storage::v1::CSIDriver>(object),
        StoredKind::CsiNode => through::<k8s_openapi::api::storage::v1::CSINode>(object),
        StoredKind::RuntimeClass => through::<k8s_openapi::api::node::v1::RuntimeClass>(object),
        StoredKind::VolumeAttachment => {
            through::<k8s_openapi::api::storage::v1::VolumeAttachment>(object);
        }
        StoredKind::ConfigMap => through::<k8s_openapi::api::core::v1::ConfigMap>(object),
        StoredKind::Secret => through::<k8s_openapi::api::core::v1::Secret>(object),
        StoredKind::ServiceAccount => {
            through::<k8s_openapi::api::core::v1::ServiceAccount>(object);
        }
        StoredKind::Service => through::<k8s_openapi::api::core::v1::Service>(object),
        StoredKind::Node
        | StoredKind::Lease
        | StoredKind::Namespace
        | StoredKind::CertificateSigningRequest => {}
    }
}

/// A create or update body that does not decode: 400, as the request decoder words it
/// (`Pod in version "v1" cannot be handled as a Pod: ...`).
pub fn check_body(resource: &ApiResource, object: &Value) -> Result<(), ApiError> {
    match decode_error(resource, object) {
        None => Ok(()),
        Some(cause) => Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {cause}",
            kind = resource.kind,
            version = resource.version,
        ))),
    }
}

/// A patched object that does not decode: 422 Invalid with a cause on `patch`, as the patch
/// handler answers (`NewInvalid(GroupKind{}, "", [Invalid("patch", ...)])`).
pub fn check_patched(
    resource: &ApiResource,
    patch: &[u8],
    patched: &Value,
) -> Result<(), ApiError> {
    match decode_error(resource, patched) {
        None => Ok(()),
        Some(cause) => {
            let shown = format!("{:?}", String::from_utf8_lossy(patch));
            Err(ApiError::invalid_patch(&FieldError::invalid_shown(
                "patch", &shown, &cause,
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resource::{CORE_EVENTS, EVENTS_V1, LEASES, NODES, PODS};
    use serde_json::json;

    #[test]
    fn fields_of_the_wrong_type_do_not_decode_and_unknown_fields_do() {
        for (resource, object, fits) in [
            (
                &PODS,
                json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [{"name": "c", "restartCount": 1, "ready": true, "image": "i", "imageID": ""}]}}),
                true,
            ),
            (
                &PODS,
                json!({"status": {"containerStatuses": [{"name": "c", "restartCount": "one"}]}}),
                false,
            ),
            (&PODS, json!({"status": {"phase": 3}}), false),
            (
                &PODS,
                json!({"status": {"conditions": {"type": "Ready"}}}),
                false,
            ),
            (
                &NODES,
                json!({"metadata": {"name": "n"}, "whatever": 1}),
                true,
            ),
            (&NODES, json!({"spec": {"unschedulable": "yes"}}), false),
            (&LEASES, json!({"spec": {"leaseDurationSeconds": 40}}), true),
            (
                &LEASES,
                json!({"spec": {"leaseDurationSeconds": "40"}}),
                false,
            ),
            (&LEASES, json!({"spec": {"renewTime": "yesterday"}}), false),
            (
                &CORE_EVENTS,
                json!({"involvedObject": {"kind": "Node"}, "count": "x"}),
                false,
            ),
            (
                &EVENTS_V1,
                json!({"eventTime": "2026-01-01T00:00:00.000000Z", "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}}),
                true,
            ),
        ] {
            assert_eq!(decode_error(resource, &object).is_none(), fits, "{object}");
        }
    }

    #[test]
    fn pods_and_events_round_trip_without_the_fields_their_type_lacks() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}], "priority": 0},
            "status": {"phase": "Pending"}, "extra": true});
        round_trip(StoredKind::Pod, &mut pod);
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "priority": 0},
                "status": {"phase": "Pending"}})
        );
        let mut event = json!({"involvedObject": {"kind": "Node"}, "metadata": {},
            "lastTimestamp": "2026-01-01T01:00:00+01:00", "extra": true});
        round_trip(StoredKind::Event, &mut event);
        assert_eq!(
            event,
            json!({"apiVersion": "v1", "kind": "Event", "involvedObject": {"kind": "Node"},
                "metadata": {}, "lastTimestamp": "2026-01-01T00:00:00Z"})
        );
        let mut node = json!({"extra": true});
        round_trip(StoredKind::Node, &mut node);
        assert_eq!(
            node,
            json!({"extra": true}),
            "other kinds are stored as sent"
        );
    }

    #[test]
    fn a_body_that_does_not_decode_is_400_naming_kind_and_version() {
        let err = check_body(&LEASES, &json!({"spec": {"leaseDurationSeconds": "40"}}))
            .expect_err("a string duration");
        assert_eq!((err.code, err.reason), (400, "BadRequest"));
        assert!(
            err.message
                .starts_with("Lease in version \"v1\" cannot be handled as a Lease: "),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_patch_that_does_not_decode_is_422_on_the_patch_field() {
        let err = check_patched(
            &PODS,
            b"{\"status\":{\"phase\":3}}",
            &json!({"status": {"phase": 3}}),
        )
        .expect_err("a numeric phase");
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        assert!(
            err.message
                .starts_with(" \"\" is invalid: patch: Invalid value: "),
            "{}",
            err.message
        );
        assert_eq!(
            err.details
                .as_ref()
                .map(|d| d["causes"][0]["field"].clone()),
            Some(json!("patch"))
        );
    }
}
