use k8s_openapi::api::core::v1::EphemeralContainer;
use serde_json::json;

use super::*;
use crate::volume_manager::fixtures::pod;

#[test]
fn each_volume_source_maps_to_the_kubelets_plugin() {
    let pod = pod(
        "u1",
        "n1",
        json!([
            {"name": "a", "emptyDir": {}},
            {"name": "b", "configMap": {"name": "cm"}},
            {"name": "c", "secret": {"secretName": "s"}},
            {"name": "d", "downwardAPI": {"items": []}},
            {"name": "e", "projected": {"sources": []}},
            {"name": "f", "hostPath": {"path": "/tmp"}},
            {"name": "g", "image": {"reference": "r/kitten:1"}},
        ]),
    );
    let got = pod_volumes(&pod);
    assert!(got.errors.is_empty(), "{:?}", got.errors);
    let plugins: Vec<(&str, Plugin, &str)> = got
        .volumes
        .iter()
        .map(|v| (v.name.as_str(), v.plugin, v.unique_name.as_str()))
        .collect();
    assert_eq!(
        plugins,
        [
            ("a", Plugin::EmptyDir, "kubernetes.io/empty-dir/u1-a"),
            ("b", Plugin::ConfigMap, "kubernetes.io/configmap/u1-b"),
            ("c", Plugin::Secret, "kubernetes.io/secret/u1-c"),
            ("d", Plugin::DownwardApi, "kubernetes.io/downward-api/u1-d"),
            ("e", Plugin::Projected, "kubernetes.io/projected/u1-e"),
            ("f", Plugin::HostPath, "kubernetes.io/host-path/u1-f"),
            ("g", Plugin::Image, "kubernetes.io/image/u1-g"),
        ]
    );
    assert!(got.volumes.iter().all(|v| !v.attachable));
}

#[test]
fn volumes_no_container_mounts_are_skipped() {
    let mut pod = pod("u1", "n1", json!([{"name": "used", "emptyDir": {}}]));
    let spec = pod.spec.as_mut().unwrap();
    spec.volumes
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(json!({"name": "unused", "emptyDir": {}})).unwrap());
    let names: Vec<String> = pod_volumes(&pod)
        .volumes
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["used"]);
}

#[test]
fn volumes_of_init_and_ephemeral_containers_count() {
    let mut pod = pod("u1", "n1", json!([]));
    let spec = pod.spec.as_mut().unwrap();
    spec.volumes = Some(vec![
        serde_json::from_value(json!({"name": "init-vol", "emptyDir": {}})).unwrap(),
        serde_json::from_value(json!({"name": "debug-vol", "emptyDir": {}})).unwrap(),
    ]);
    spec.init_containers = Some(vec![
        serde_json::from_value(
            json!({"name": "init", "volumeMounts": [{"name": "init-vol", "mountPath": "/i"}]}),
        )
        .unwrap(),
    ]);
    let debug: EphemeralContainer = serde_json::from_value(
        json!({"name": "dbg", "volumeMounts": [{"name": "debug-vol", "mountPath": "/d"}]}),
    )
    .unwrap();
    spec.ephemeral_containers = Some(vec![debug]);
    let names: Vec<String> = pod_volumes(&pod)
        .volumes
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["debug-vol", "init-vol"]);
}

#[test]
fn unsupported_and_undeclared_volumes_are_errors_not_silence() {
    let mut pod = pod(
        "u1",
        "n1",
        json!([
            {"name": "data", "csi": {"driver": "inline.csi.test"}},
            {"name": "ok", "emptyDir": {}},
        ]),
    );
    let container = &mut pod.spec.as_mut().unwrap().containers[0];
    container
        .volume_mounts
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(json!({"name": "ghost", "mountPath": "/g"})).unwrap());
    let got = pod_volumes(&pod);
    assert_eq!(got.volumes.len(), 1);
    assert_eq!(
        got.errors,
        [
            SpecError::Unsupported {
                volume: "data".into(),
                kind: "csi"
            },
            SpecError::Undeclared {
                volume: "ghost".into()
            },
        ]
    );
    assert_eq!(
        got.errors[0].to_string(),
        "volume \"data\": csi volumes are not supported by nodepulse yet"
    );
}

fn claim_pod() -> k8s_openapi::api::core::v1::Pod {
    pod(
        "u1",
        "n1",
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]),
    )
}

#[test]
fn an_unresolved_claim_waits_and_is_no_error() {
    let got = pod_volumes(&claim_pod());
    assert!(got.volumes.is_empty() && got.errors.is_empty());
    assert_eq!(got.unresolved, ["data"]);
}

#[test]
fn a_resolved_claim_is_its_csi_volume_and_a_failed_one_the_pods_error() {
    use crate::{
        ports::CsiVolume,
        volume_manager::ResolvedClaim,
        volume_manager::{ClaimRef, ResolvedClaims, csi_unique_name, spec::pod_volumes_with},
    };
    let volume = CsiVolume {
        driver: "d.csi.test".into(),
        volume_handle: "h1".into(),
        pv_name: "pv1".into(),
        ..CsiVolume::default()
    };
    let key = ("u1".to_owned(), "data".to_owned());
    let resolved = ResolvedClaim {
        unique_name: csi_unique_name(&volume),
        volume: Arc::new(volume.clone()),
        attachable: true,
    };
    let claims: ResolvedClaims = [(key.clone(), Ok(resolved))].into();
    let got = pod_volumes_with(&crate::kept_pod::KeptPod::from(claim_pod()), &claims);
    assert_eq!(got.volumes.len(), 1);
    let data = &got.volumes[0];
    assert_eq!(data.plugin, Plugin::Csi);
    assert!(data.attachable);
    assert_eq!(
        data.unique_name.to_string(),
        "kubernetes.io/csi/d.csi.test^h1"
    );
    assert_eq!(data.csi.as_deref(), Some(&volume));

    let claim = ClaimRef {
        namespace: "default",
        claim: "c",
        read_only: false,
    };
    let error = claim.error(crate::volume_manager::ClaimReason::FetchClaim(
        "persistentvolumeclaims \"c\" not found".into(),
    ));
    let claims: ResolvedClaims = [(key, Err(error))].into();
    let got = pod_volumes_with(&crate::kept_pod::KeptPod::from(claim_pod()), &claims);
    assert!(got.volumes.is_empty());
    assert_eq!(got.errors[0].volume(), "data");
    assert_eq!(
        got.errors[0].to_string(),
        "error processing PVC default/c: failed to fetch PVC from API server: persistentvolumeclaims \"c\" not found"
    );
}
