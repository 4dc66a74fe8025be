use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::CSIDriver,
};
use serde_json::json;

use super::*;
use crate::volume_manager::csi_unique_name;

const CLAIM: ClaimRef<'static> = ClaimRef {
    namespace: "apps",
    claim: "data",
    read_only: false,
};

fn pvc(phase: &str, volume_name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": { "name": "data", "namespace": "apps", "uid": "claim-uid" },
        "spec": { "volumeName": volume_name },
        "status": { "phase": phase },
    }))
    .expect("pvc")
}

fn pv(claim_uid: Option<&str>) -> PersistentVolume {
    let mut pv = json!({
        "metadata": { "name": "pv-1" },
        "spec": {
            "accessModes": ["ReadOnlyMany", "ReadWriteOnce"],
            "mountOptions": ["noatime"],
            "csi": {
                "driver": "csi.example.com",
                "volumeHandle": "vol-1",
                "fsType": "ext4",
                "readOnly": false,
                "volumeAttributes": { "tier": "gold" },
            },
        },
    });
    if let Some(uid) = claim_uid {
        pv["spec"]["claimRef"] = json!({ "namespace": "apps", "name": "data", "uid": uid });
    }
    serde_json::from_value(pv).expect("pv")
}

#[test]
fn a_bound_claim_names_its_volume() {
    assert_eq!(
        bound_volume_name(&CLAIM, &pvc("Bound", "pv-1")),
        Ok("pv-1".to_owned())
    );
}

#[test]
fn an_unbound_claim_is_refused_with_the_kubelets_text() {
    let error = bound_volume_name(&CLAIM, &pvc("Pending", "")).expect_err("pending");
    assert_eq!(
        error.to_string(),
        r#"error processing PVC apps/data: PVC apps/data has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")"#
    );
}

#[test]
fn a_claim_being_deleted_starts_no_pod() {
    let mut claim = pvc("Bound", "pv-1");
    claim.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let error = bound_volume_name(&CLAIM, &claim).expect_err("deleting");
    assert_eq!(
        error.to_string(),
        "error processing PVC apps/data: can't start pod because PVC apps/data is being deleted"
    );
}

#[test]
fn the_csi_source_of_the_bound_pv_becomes_the_volume() {
    let volume = csi_volume(&CLAIM, &pvc("Bound", "pv-1"), &pv(Some("claim-uid"))).expect("csi");
    assert_eq!(volume.driver, "csi.example.com");
    assert_eq!(volume.volume_handle, "vol-1");
    assert_eq!(volume.pv_name, "pv-1");
    assert_eq!(volume.fs_type, "ext4");
    assert_eq!(volume.access_mode, "ReadOnlyMany", "the first access mode");
    assert_eq!(volume.mount_options, ["noatime"]);
    assert_eq!(
        volume.volume_attributes.get("tier").map(String::as_str),
        Some("gold")
    );
    assert!(!volume.read_only);
    assert_eq!(
        csi_unique_name(&volume).as_str(),
        "kubernetes.io/csi/csi.example.com^vol-1"
    );
}

#[test]
fn the_claims_read_only_makes_the_volume_read_only() {
    let claim = ClaimRef {
        read_only: true,
        ..CLAIM
    };
    let volume = csi_volume(&claim, &pvc("Bound", "pv-1"), &pv(Some("claim-uid"))).expect("csi");
    assert!(volume.read_only);
}

#[test]
fn a_pv_bound_to_another_claim_or_to_none_is_refused() {
    let none = csi_volume(&CLAIM, &pvc("Bound", "pv-1"), &pv(None)).expect_err("unbound");
    assert_eq!(
        none.to_string(),
        "error processing PVC apps/data: found PV object pv-1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"
    );
    let other = csi_volume(&CLAIM, &pvc("Bound", "pv-1"), &pv(Some("other"))).expect_err("other");
    assert_eq!(
        other.to_string(),
        "error processing PVC apps/data: found PV object pv-1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID claim-uid"
    );
}

#[test]
fn a_pv_without_access_modes_is_read_write_once() {
    let mut volume = pv(Some("claim-uid"));
    volume.spec.as_mut().expect("spec").access_modes = None;
    let volume = csi_volume(&CLAIM, &pvc("Bound", "pv-1"), &volume).expect("csi");
    assert_eq!(volume.access_mode, "ReadWriteOnce");
}

#[test]
fn attach_is_required_unless_the_csidriver_says_false() {
    let driver = |attach: Option<bool>| -> CSIDriver {
        let mut driver: CSIDriver =
            serde_json::from_value(json!({ "metadata": { "name": "d" }, "spec": {} }))
                .expect("driver");
        driver.spec.attach_required = attach;
        driver
    };
    assert!(attach_required(None), "no CSIDriver object");
    assert!(attach_required(Some(&driver(None))));
    assert!(attach_required(Some(&driver(Some(true)))));
    assert!(!attach_required(Some(&driver(Some(false)))));
}
