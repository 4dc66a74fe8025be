//! The storage kinds' create defaulting and validation, through the store's strategy as a
//! request reaches them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::api::resource::{
    CSI_DRIVERS, CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS,
};
use crate::store::strategy::{prepare_for_create, validate_create};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

fn messages(errors: &[crate::api::FieldError]) -> Vec<String> {
    errors
        .iter()
        .map(|error| format!("{}: {}", error.field, error.message))
        .collect()
}

#[test]
fn a_csidriver_gets_the_api_servers_defaults() {
    let mut driver = json!({"metadata": {"name": "csi.example.com"}, "spec": {}});
    prepare_for_create(&CSI_DRIVERS, &mut driver, "u", now());
    assert_eq!(driver["apiVersion"], "storage.k8s.io/v1");
    assert_eq!(driver["kind"], "CSIDriver");
    assert_eq!(driver["spec"]["attachRequired"], true);
    assert_eq!(driver["spec"]["podInfoOnMount"], false);
    assert_eq!(driver["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    assert_eq!(
        driver["spec"]["volumeLifecycleModes"],
        json!(["Persistent"])
    );

    let mut explicit = json!({"metadata": {"name": "d"}, "spec": {"attachRequired": false}});
    prepare_for_create(&CSI_DRIVERS, &mut explicit, "u", now());
    assert_eq!(
        explicit["spec"]["attachRequired"], false,
        "a sent value stays"
    );
}

#[test]
fn new_volumes_and_claims_start_pending_with_their_defaults() {
    let mut pv = json!({"metadata": {"name": "pv-1"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": "d", "volumeHandle": "h"}}, "status": {"phase": "Bound"}});
    prepare_for_create(&PERSISTENT_VOLUMES, &mut pv, "u", now());
    assert_eq!(pv["status"], json!({"phase": "Pending"}));
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
    assert!(validate_create(&PERSISTENT_VOLUMES, &pv).is_empty());

    let mut pvc = json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    prepare_for_create(&PERSISTENT_VOLUME_CLAIMS, &mut pvc, "u", now());
    assert_eq!(pvc["status"], json!({"phase": "Pending"}));
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    assert!(validate_create(&PERSISTENT_VOLUME_CLAIMS, &pvc).is_empty());
}

#[test]
fn volumes_and_claims_without_their_required_fields_are_invalid() {
    let pv = json!({"metadata": {"name": "pv-1"}, "spec": {"csi": {"driver": ""}}});
    assert_eq!(
        messages(&validate_create(&PERSISTENT_VOLUMES, &pv)),
        [
            "spec.accessModes: Required value",
            "spec.capacity: Required value",
            "spec.csi.driver: Required value",
            "spec.csi.volumeHandle: Required value",
        ]
    );
    let sourceless = json!({"metadata": {"name": "pv-2"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    assert_eq!(
        messages(&validate_create(&PERSISTENT_VOLUMES, &sourceless)),
        ["spec: Required value: must specify a volume type"]
    );
    let pvc = json!({"metadata": {"name": "c"}, "spec": {}});
    assert_eq!(
        messages(&validate_create(&PERSISTENT_VOLUME_CLAIMS, &pvc)),
        [
            "spec.accessModes: Required value: at least 1 access mode is required",
            "spec.resources[storage]: Required value",
        ]
    );
}

#[test]
fn a_volume_attachment_needs_attacher_source_and_a_node_name_in_that_order() {
    let mut attachment = json!({"metadata": {"name": "csi-abc"}, "spec": {
        "attacher": "d", "nodeName": "n", "source": {"persistentVolumeName": "pv-1"}},
        "status": {"attached": true}});
    prepare_for_create(&VOLUME_ATTACHMENTS, &mut attachment, "u", now());
    assert_eq!(
        attachment["status"],
        json!({"attached": false}),
        "status is the attacher's"
    );
    assert!(validate_create(&VOLUME_ATTACHMENTS, &attachment).is_empty());
    let empty = json!({"metadata": {"name": "csi-abc"}, "spec": {"source": {}}});
    assert_eq!(
        messages(&validate_create(&VOLUME_ATTACHMENTS, &empty)),
        [
            "spec.attacher: Required value",
            "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            "spec.nodeName: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]
    );
}

#[test]
fn a_csinode_driver_needs_a_name_and_a_node_id() {
    let csi_node =
        json!({"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "nodeID": ""}]}});
    assert_eq!(
        messages(&validate_create(&CSI_NODES, &csi_node)),
        ["spec.drivers[0].nodeID: Required value"]
    );
}
