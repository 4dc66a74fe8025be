//! Test pods for the volume manager's table tests, built from JSON so they read like manifests.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// A pod bound to `node` with one container mounting every volume in `volumes`.
pub fn pod(uid: &str, node: &str, volumes: serde_json::Value) -> Pod {
    let mounts: Vec<serde_json::Value> = volumes
        .as_array()
        .expect("volumes is a list")
        .iter()
        .map(|v| json!({"name": v["name"], "mountPath": format!("/mnt/{}", v["name"].as_str().unwrap())}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{uid}"), "namespace": "default", "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts}],
            "volumes": volumes,
        },
        "status": {"phase": "Running"},
    }))
    .expect("a valid pod")
}

/// A pod with a configMap volume `cfg` and an emptyDir volume `cache`.
pub fn pod_with_cfg_and_cache(uid: &str, node: &str) -> Pod {
    pod(
        uid,
        node,
        json!([
            {"name": "cfg", "configMap": {"name": "app"}},
            {"name": "cache", "emptyDir": {}},
        ]),
    )
}
