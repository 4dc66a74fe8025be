//! Storage objects for the CSI tests, each owned for the clean-up: a CSIDriver, a CSI
//! PersistentVolume bound to a claim (statuses written as the PV controller writes them, so the
//! emulator, which has no PV controller, and a real cluster agree), and a node's CSINode; and
//! the cluster whose attach/detach controller leaves attaching to the test.

use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::{CSIDriver, CSINode, VolumeAttachment},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::cleanup::{Owned, own};

fn own_path(path: String) {
    own(Owned::Object { path });
}

/// A CSIDriver `name` with `attachRequired`.
pub async fn create_csi_driver(client: &kube::Client, name: &str, attach_required: bool) {
    own_path(format!("/apis/storage.k8s.io/v1/csidrivers/{name}"));
    let driver: CSIDriver = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"attachRequired": attach_required},
    }))
    .expect("a CSIDriver");
    Api::<CSIDriver>::all(client.clone())
        .create(&PostParams::default(), &driver)
        .await
        .expect("the CSIDriver is created");
}

/// The node's CSINode with `driver` and its node ID, as registration leaves it.
pub async fn create_csi_node(client: &kube::Client, node: &str, driver: &str, node_id: &str) {
    own_csi_node(node);
    let csi_node: CSINode = serde_json::from_value(json!({
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": driver, "nodeID": node_id}]},
    }))
    .expect("a CSINode");
    Api::<CSINode>::all(client.clone())
        .create(&PostParams::default(), &csi_node)
        .await
        .expect("the CSINode is created");
}

/// Owns the node's CSINode, whoever creates it.
pub fn own_csi_node(node: &str) {
    own_path(format!("/apis/storage.k8s.io/v1/csinodes/{node}"));
}

/// Owns every VolumeAttachment name the test expects, should the controller leave one.
pub fn own_volume_attachment(name: &str) {
    own_path(format!("/apis/storage.k8s.io/v1/volumeattachments/{name}"));
}

/// Claim `claim` in `namespace` bound to CSI PV `pv` (`driver`, `handle`), both Bound.
pub async fn create_bound_claim(
    client: &kube::Client,
    namespace: &str,
    claim: &str,
    pv: &str,
    driver: &str,
    handle: &str,
) {
    own_path(format!(
        "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
    ));
    own_path(format!("/api/v1/persistentvolumes/{pv}"));
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let created = claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": claim},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                         "resources": {"requests": {"storage": "1Gi"}}},
            }))
            .expect("a claim"),
        )
        .await
        .expect("the claim is created");
    let volumes = Api::<PersistentVolume>::all(client.clone());
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": pv},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                         "claimRef": {"namespace": namespace, "name": claim, "uid": created.metadata.uid},
                         "csi": {"driver": driver, "volumeHandle": handle}},
            }))
            .expect("a PV"),
        )
        .await
        .expect("the PV is created");
    let bound = Patch::Merge(json!({"status": {"phase": "Bound"}}));
    volumes
        .patch_status(pv, &PatchParams::default(), &bound)
        .await
        .expect("the PV is Bound");
    let claim_bound = Patch::Merge(json!({"status": {"phase": "Bound",
        "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}));
    claims
        .patch_status(claim, &PatchParams::default(), &claim_bound)
        .await
        .expect("the claim is Bound");
}

/// A test cluster whose attach/detach controller creates and deletes VolumeAttachments but
/// attaches nothing: the test plays the driver's external attacher, on the emulator as on a
/// real cluster (which has no attacher for the test's driver).
pub async fn cluster_with_test_attacher() -> crate::cluster::TestCluster {
    crate::cluster::TestCluster::start_with(nodepulse_emulator::EmulatorConfig {
        attach_detach: nodepulse_emulator::AttachDetachConfig {
            enabled: true,
            attacher: false,
        },
        ..nodepulse_emulator::EmulatorConfig::for_tests()
    })
    .await
}

/// VolumeAttachment `name`, if it exists.
pub async fn read_attachment(client: &kube::Client, name: &str) -> Option<VolumeAttachment> {
    Api::<VolumeAttachment>::all(client.clone())
        .get_opt(name)
        .await
        .expect("VolumeAttachment read")
}
