//! The storage kinds the volume manager and the attach/detach handshake use, as kube-apiserver
//! serves them: discovery lists them, CSIDriver's defaults, PersistentVolumes and claims start
//! Pending, a VolumeAttachment starts unattached, only `/status` attaches it and its spec never
//! changes, CSI driver names are DNS subdomains, and objects missing required fields are 422
//! with the API server's causes.

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
        "spec.nodeName: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ] {
        assert!(
            attachment_causes.iter().any(|cause| cause == expected),
            "{expected} in {attachment_causes:?}"
        );
    }
}

/// `ValidateVolumeAttachmentUpdate`: a PUT or a patch that changes the spec is 422 on `spec`,
/// the bad value printed as the internal Go struct; other fields still change.
#[tokio::test]
async fn a_volume_attachments_spec_is_immutable() {
    let cluster = Cluster::start().await;
    let name = unique("immutable");
    let (node, volume) = (unique("nonode"), unique("nopv"));
    let created = cluster
        .post(
            ATTACHMENTS,
            &json!({"metadata": {"name": name}, "spec": {"attacher": "csi.example.com",
                "nodeName": node, "source": {"persistentVolumeName": volume}}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let path = format!("{ATTACHMENTS}/{name}");
    let mut moved = created.body.clone();
    moved["spec"]["nodeName"] = json!("np-elsewhere");
    let put = cluster.put(&path, &moved).await;
    assert_eq!(
        (put.status, put.body["reason"].as_str()),
        (422, Some("Invalid")),
        "{:?}",
        put.body
    );
    let shown = format!(
        "{{\"Attacher\":\"csi.example.com\",\"Source\":{{\"PersistentVolumeName\":\"{volume}\",\"InlineVolumeSpec\":null}},\"NodeName\":\"np-elsewhere\"}}"
    );
    assert_eq!(
        put.body["message"],
        format!(
            "VolumeAttachment.storage.k8s.io {name:?} is invalid: spec: Invalid value: {shown}: field is immutable"
        )
    );
    assert_eq!(
        put.body["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec",
            "message": format!("Invalid value: {shown}: field is immutable")}])
    );
    let patched = cluster
        .patch(
            &path,
            MERGE,
            &json!({"spec": {"attacher": "other.example.com"}}),
        )
        .await;
    assert_eq!(patched.status, 422, "{:?}", patched.body);
    assert_eq!(causes(&patched.body).len(), 1, "{:?}", patched.body);
    let labelled = cluster
        .patch(&path, MERGE, &json!({"metadata": {"labels": {"a": "b"}}}))
        .await;
    assert_eq!(labelled.status, 200, "{:?}", labelled.body);
    assert_eq!(labelled.body["spec"], created.body["spec"]);
}

/// `ValidateCSIDriverName` on a VolumeAttachment's attacher, a CSINode's drivers and a
/// PersistentVolume's CSI driver: required, at most 63 bytes, a DNS subdomain once lowercased;
/// a CSIDriver's name is a DNS subdomain.
#[tokio::test]
async fn csi_driver_names_must_be_dns_subdomains() {
    const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let cluster = Cluster::start().await;
    let attachment = |attacher: &str| {
        json!({"metadata": {"name": unique("drivername")}, "spec": {"attacher": attacher,
            "nodeName": unique("nonode"), "source": {"persistentVolumeName": unique("nopv")}}})
    };
    let refused = cluster.post(ATTACHMENTS, &attachment("csi_example")).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert_eq!(
        causes(&refused.body),
        [format!(
            "spec.attacher: Invalid value: \"csi_example\": {SUBDOMAIN}"
        )]
    );
    let long = format!("{}.example.com", "d".repeat(52));
    let refused = cluster.post(ATTACHMENTS, &attachment(&long)).await;
    assert_eq!(
        causes(&refused.body),
        ["spec.attacher: Too long: may not be more than 63 bytes"],
        "{:?}",
        refused.body
    );
    let upper = cluster
        .post(ATTACHMENTS, &attachment("CSI.Example.COM"))
        .await;
    assert_eq!(upper.status, 201, "checked lowercased: {:?}", upper.body);

    let node = cluster
        .post(
            "/apis/storage.k8s.io/v1/csinodes",
            &json!({"metadata": {"name": unique("csinode")}, "spec": {"drivers": [
                {"name": "-csi.example.com", "nodeID": "n"}]}}),
        )
        .await;
    assert_eq!(
        causes(&node.body),
        [format!(
            "spec.drivers[0].name: Invalid value: \"-csi.example.com\": {SUBDOMAIN}"
        )],
        "{:?}",
        node.body
    );
    let volume = cluster
        .post(
            PVS,
            &json!({"metadata": {"name": unique("pv")}, "spec": {"accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"}, "csi": {"driver": "csi example", "volumeHandle": "h"}}}),
        )
        .await;
    assert_eq!(
        causes(&volume.body),
        [format!(
            "spec.csi.driver: Invalid value: \"csi example\": {SUBDOMAIN}"
        )],
        "{:?}",
        volume.body
    );
    let driver = cluster
        .post(
            CSI_DRIVERS,
            &json!({"metadata": {"name": "Csi.Example.com"}, "spec": {}}),
        )
        .await;
    assert_eq!(
        causes(&driver.body),
        [format!(
            "metadata.name: Invalid value: \"Csi.Example.com\": {SUBDOMAIN}"
        )],
        "{:?}",
        driver.body
    );
}
