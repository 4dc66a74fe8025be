//! The PLEG hands what it inspected to the pod's worker: a container that changed costs one
//! round of status calls before the sync acts, not two.

use std::time::Duration;

use serde_json::json;

use crate::provider::tests::{Harness, phase, pod};

#[tokio::test(start_paused = true)]
async fn a_change_the_pleg_inspected_is_not_inspected_again_by_the_worker() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
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

#[tokio::test(start_paused = true)]
async fn an_inspection_listed_before_the_pods_last_write_or_during_a_sync_is_dropped() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let engine = std::sync::Arc::clone(&harness.pods.engine);
    let (uid, seen) = {
        let core = engine.core();
        let (uid, entry) = core.pods.iter().next().expect("the pod");
        (uid.clone(), entry.generation)
    };
    // A slow outside inspection that listed nothing, finishing after the pod's own read.
    engine.refresh(&uid).await.unwrap();
    let written = engine.inspect(&uid, vec![], vec![], Some(seen)).await;
    assert!(!written.unwrap(), "listed before the last write: dropped");
    let now = engine.core().pods[&uid].generation;
    engine.core().pods.get_mut(&uid).unwrap().work.request();
    let written = engine.inspect(&uid, vec![], vec![], Some(now)).await;
    assert!(
        !written.unwrap(),
        "a sync runs: its own read is the one that counts"
    );
    let core = engine.core();
    assert_eq!(core.pods[&uid].generation, now);
    assert!(
        !core.pods[&uid].runtime.containers.is_empty(),
        "the sync's view stands"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pleg_that_cannot_relist_for_three_minutes_is_unhealthy_and_healthy_after_a_relist() {
    use nodepulse_actors::ports::HealthCheck;
    use tokio::time::Instant;

    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let health = harness.pods.pleg_health();
    assert_eq!(health.unhealthy(Instant::now()), None);
    harness.runtime.fail_lists(true);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let failing = Instant::now();
    tokio::time::sleep(Duration::from_secs(178)).await;
    assert_eq!(
        health.unhealthy(Instant::now()),
        None,
        "within the threshold"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let message = health.unhealthy(Instant::now()).expect("unhealthy");
    assert!(
        message.starts_with("pleg was last seen active 3m")
            && message.ends_with("s ago; threshold is 3m0s"),
        "{message} ({:?} after the lists began failing)",
        failing.elapsed()
    );
    harness.runtime.fail_lists(false);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(health.unhealthy(Instant::now()), None, "relisted");
}
