//! The PLEG hands what it inspected to the pod's worker: a container that changed costs one
//! round of status calls before the sync acts, not two.

use serde_json::json;

use crate::pods::cri::tests::{Harness, phase, pod};

#[tokio::test(start_paused = true)]
async fn a_change_the_pleg_inspected_is_not_inspected_again_by_the_worker() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let before = harness.runtime.count("ContainerStatus");
    harness.runtime.exit("app", 0);
    harness
        .status_where("Succeeded", |s| phase(s) == "Succeeded")
        .await;
    harness.wait_terminated().await;
    assert_eq!(
        harness.runtime.count("ContainerStatus") - before,
        2,
        "the PLEG's inspection, then one after the sync stopped the sandbox: {:?}",
        harness.runtime.calls()
    );
}
