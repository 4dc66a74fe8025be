//! The engine's tasks under supervision, on paused time: a pod worker that panics is counted
//! and the pod syncs again; a PLEG that panics relists again, counted; both in the debug view.

use std::time::Duration;

use serde_json::json;

use super::tests::{Harness, phase, pod};
use nodepulse_actors::pods::{PodLifecycleProvider, ProviderFault};

#[tokio::test(start_paused = true)]
async fn a_pod_worker_that_panics_is_counted_and_the_pod_syncs_again() {
    let mut harness = Harness::new();
    assert!(harness.pods.inject_fault(ProviderFault::PodWorker {
        pod_uid: "u1".to_owned()
    }));
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running after the panic", |s| phase(s) == "Running")
        .await;
    let panics = &harness.pods.debug_state()["taskPanics"];
    assert_eq!(panics["podWorkers"], 1, "{panics}");
    assert_eq!(
        harness.runtime.count("RunPodSandbox"),
        1,
        "the re-armed sync ran the pod once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panic_that_ends_the_pleg_restarts_it_counted() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert!(harness.pods.inject_fault(ProviderFault::Pleg));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let panics = &harness.pods.debug_state()["taskPanics"];
    assert_eq!(panics["pleg"], 1, "{panics}");
    // Only the PLEG notices an exit: the restarted one does.
    harness.runtime.exit("app", 0);
    harness
        .status_where("Succeeded, seen by the restarted PLEG", |s| {
            phase(s) == "Succeeded"
        })
        .await;
}
