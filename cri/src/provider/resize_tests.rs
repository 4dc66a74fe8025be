//! In-place resize through the provider against the in-memory runtime: a running container
//! whose spec's CPU and memory change is updated with UpdateContainerResources, not restarted,
//! and its status `resources` follow what the runtime then reports.

use serde_json::json;

use super::tests::{Harness, app, condition, phase, pod};

fn sized(cpu: &str, memory: &str) -> k8s_openapi::api::core::v1::Pod {
    pod(
        "Always",
        json!({"containers": [{"name": "app", "image": super::tests::IMAGE, "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        }}]}),
    )
}

#[tokio::test(start_paused = true)]
async fn a_resized_running_container_is_updated_in_place_and_its_status_follows() {
    let mut harness = Harness::new();
    harness.apply(&sized("100m", "100Mi"));
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert_eq!(app(&status)["resources"]["limits"]["cpu"], "100m");
    assert_eq!(app(&status)["allocatedResources"]["memory"], "100Mi");
    harness.apply(&sized("200m", "200Mi"));
    let status = harness
        .status_where("resized", |s| {
            app(s)["resources"]["limits"]["cpu"] == "200m"
        })
        .await;
    assert_eq!(app(&status)["resources"]["limits"]["memory"], "200Mi");
    assert_eq!(app(&status)["resources"]["requests"]["cpu"], "200m");
    assert_eq!(app(&status)["restartCount"], 0);
    assert_eq!(harness.runtime.count("CreateContainer"), 1, "not restarted");
    assert_eq!(harness.runtime.count("UpdateContainerResources"), 1);
    assert_eq!(
        condition(&status, "PodResizeInProgress"),
        &serde_json::Value::Null,
        "applied: no resize in progress"
    );
}
