//! A spec update of a pod the CRI provider runs is a sync, as for the kubelet's pod workers:
//! the status it reports then has every condition observing the new `metadata.generation`,
//! also while the pod waits for an image that cannot be pulled.

use serde_json::{Value, json};

use super::tests::{Harness, condition, phase, pod, waiting_reason};

const CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

fn at_generation(generation: i64, spec: Value) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = pod("Always", spec);
    pod.metadata.generation = Some(generation);
    pod
}

fn all_observed(status: &Value, generation: i64) -> bool {
    CONDITIONS
        .iter()
        .all(|kind| condition(status, kind)["observedGeneration"] == generation)
}

#[tokio::test(start_paused = true)]
async fn a_spec_update_of_a_running_pod_is_reported_with_the_new_generation() {
    let mut harness = Harness::new();
    harness.apply(&at_generation(1, json!({})));
    let running = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert!(all_observed(&running, 1), "{running}");
    harness.apply(&at_generation(2, json!({"activeDeadlineSeconds": 5000})));
    let updated = harness
        .status_where("generation 2 observed", |s| all_observed(s, 2))
        .await;
    assert_eq!(phase(&updated), "Running");
}

#[tokio::test(start_paused = true)]
async fn a_pod_waiting_for_its_image_reports_the_generation_that_fixed_it() {
    let mut harness = Harness::new();
    let missing = json!({"containers": [{"name": "app", "image": "nodepulse.test/missing:1",
        "imagePullPolicy": "Never"}]});
    harness.apply(&at_generation(1, missing));
    let waiting = harness
        .status_where("ErrImageNeverPull", |s| {
            waiting_reason(s) == "ErrImageNeverPull"
        })
        .await;
    assert!(all_observed(&waiting, 1), "{waiting}");
    harness.apply(&at_generation(2, json!({})));
    harness
        .status_where("Running at generation 2", |s| {
            phase(s) == "Running" && all_observed(s, 2)
        })
        .await;
}
