//! The storage kinds the volume manager and the attach/detach handshake use, as kube-apiserver
//! serves them: discovery lists them, CSIDriver's defaults, PersistentVolumes and claims start
//! Pending, a VolumeAttachment starts unattached and only `/status` attaches it, and objects
//! missing required fields are 422 with the API server's causes.

use serde_json::{Value, json};

use crate::common::{Cluster, unique};

const PVS: &str = "/api/v1/persistentvolumes";
const PVCS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";
const CSI_DRIVERS: &str = "/apis/storage.k8s.io/v1/csidrivers";
const ATTACHMENTS: &str = "/apis/storage.k8s.io/v1/volumeattachments";
const MERGE: &str = "application/merge-patch+json";

fn causes(reply: &Value) -> Vec<String> {
    reply["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|cause| {
            format!(
                "{}: {}",
                cause["field"].as_str().unwrap_or(""),
                cause["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The resource names a discovery document lists.
fn resource_names(reply: &Value) -> Vec<&str> {
    reply["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["name"].as_str())
        .collect()
}

#[tokio::test]
async fn discovery_lists_the_storage_kinds() {
    let cluster = Cluster::start().await;
    let core = cluster.get("/api/v1").await;
    let core_names = resource_names(&core.body);
    for name in [
        "persistentvolumes",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
    ] {
        assert!(core_names.contains(&name), "{name} in {core_names:?}");
    }
    let storage = cluster.get("/apis/storage.k8s.io/v1").await;
    assert_eq!(storage.status, 200);
    let names = resource_names(&storage.body);
    for name in [
        "csidrivers",
        "csinodes",
        "volumeattachments",
        "volumeattachments/status",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
}

#[tokio::test]
async fn a_csidriver_gets_kube_apiservers_defaults() {
    let cluster = Cluster::start().await;
    let name = format!("{}.csi.example.com", unique("driver"));
    let created = cluster
        .post(
            CSI_DRIVERS,
            &json!({"metadata": {"name": name}, "spec": {}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(spec["attachRequired"], true);
    assert_eq!(spec["podInfoOnMount"], false);
    assert_eq!(spec["requiresRepublish"], false);
    assert_eq!(spec["storageCapacity"], false);
    assert_eq!(spec["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    assert_eq!(spec["volumeLifecycleModes"], json!(["Persistent"]));
}

#[tokio::test]
async fn new_volumes_and_claims_start_pending() {
    let cluster = Cluster::start().await;
    let pv = unique("pv");
    let created = cluster
        .post(
            PVS,
            &json!({"metadata": {"name": pv}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "csi": {"driver": "csi.example.com", "volumeHandle": pv}}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["status"]["phase"], "Pending");
    assert_eq!(
        created.body["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    assert_eq!(created.body["spec"]["volumeMode"], "Filesystem");

    let claim = unique("claim");
    let created = cluster
        .post(
            PVCS,
            &json!({"metadata": {"name": claim}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["status"]["phase"], "Pending");
    assert_eq!(created.body["spec"]["volumeMode"], "Filesystem");
}

#[tokio::test]
async fn a_volume_attachment_is_attached_only_through_status() {
    let cluster = Cluster::start().await;
    let name = unique("attachment");
    let created = cluster
        .post(
            ATTACHMENTS,
            &json!({"metadata": {"name": name}, "spec": {
                "attacher": "csi.example.com", "nodeName": "np-no-such-node",
                "source": {"persistentVolumeName": "np-no-such-pv"}},
                "status": {"attached": true}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["status"], json!({"attached": false}));
    let path = format!("{ATTACHMENTS}/{name}");
    let main = cluster
        .patch(&path, MERGE, &json!({"status": {"attached": true}}))
        .await;
    assert_eq!(
        main.body["status"]["attached"], false,
        "the main resource ignores status"
    );
    let status = cluster
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"status": {"attached": true, "attachmentMetadata": {"devicePath": "/dev/x"}}}),
        )
        .await;
    assert_eq!(status.status, 200, "{:?}", status.body);
    assert_eq!(status.body["status"]["attached"], true);
    assert_eq!(
        status.body["status"]["attachmentMetadata"]["devicePath"],
        "/dev/x"
    );
}

#[tokio::test]
async fn storage_objects_missing_required_fields_are_invalid() {
    let cluster = Cluster::start().await;
    let claim = cluster
        .post(
            PVCS,
            &json!({"metadata": {"name": unique("claim")}, "spec": {}}),
        )
        .await;
    assert_eq!(claim.status, 422, "{:?}", claim.body);
    let claim_causes = causes(&claim.body);
    for expected in [
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    ] {
        assert!(
            claim_causes.iter().any(|cause| cause == expected),
            "{expected} in {claim_causes:?}"
        );
    }
    let attachment = cluster
        .post(
            ATTACHMENTS,
            &json!({"metadata": {"name": unique("attachment")}, "spec": {"source": {}}}),
        )
        .await;
    assert_eq!(attachment.status, 422, "{:?}", attachment.body);
    let attachment_causes = causes(&attachment.body);
    for expected in [
        "spec.attacher: Required value",
        "spec.nodeName: Required value",
    ] {
        assert!(
            attachment_causes.iter().any(|cause| cause == expected),
            "{expected} in {attachment_causes:?}"
        );
    }
}
