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
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
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
                kind: "persistentVolumeClaim"
            },
            SpecError::Undeclared {
                volume: "ghost".into()
            },
        ]
    );
    assert_eq!(
        got.errors[0].to_string(),
        "volume \"data\": persistentVolumeClaim volumes are not supported by nodepulse yet"
    );
}
