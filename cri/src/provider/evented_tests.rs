//! The evented PLEG against the in-memory runtime, on paused time: with an event stream a
//! container's exit is synced at once while the relist runs every 300 s (back-offs still end
//! on time); a broken stream is retried, then the relist returns to 1 s; without a stream
//! (containerd 1.6) the 1 s relist is all, and the runtime is asked once.

use std::{sync::Arc, time::Duration};

use serde_json::json;

use super::EVENTED_RELIST_PERIOD;
use crate::provider::tests::{Harness, app, phase, pod};
use nodepulse_actors::ports::fakes::{container_runtime::FakeRuntime, paused_wall_clock};

fn relists(harness: &Harness) -> u64 {
    harness.pods.engine.core().relists
}

/// A provider over a runtime with an event stream, running an `Always` pod, the stream followed.
async fn running_evented() -> Harness {
    let runtime = FakeRuntime::new(paused_wall_clock())
        .with_image(crate::provider::tests::IMAGE)
        .with_events();
    let mut harness = Harness::over(Arc::new(runtime));
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(harness.pods.engine.core().evented);
    harness
}

#[tokio::test(start_paused = true)]
async fn with_events_an_exit_is_synced_at_once_and_the_relist_slows_to_300_s() {
    let mut harness = running_evented().await;
    let before = relists(&harness);
    tokio::time::sleep(EVENTED_RELIST_PERIOD - Duration::from_secs(5)).await;
    assert!(
        relists(&harness) - before <= 1,
        "one relist at most in 295 s: {}",
        relists(&harness) - before
    );

    let exited = tokio::time::Instant::now();
    harness.runtime.exit("app", 1);
    harness
        .status_where("restarted", |s| app(s)["restartCount"] == 1)
        .await;
    assert!(
        exited.elapsed() < Duration::from_secs(1),
        "synced on the event, not at the next relist: {:?}",
        exited.elapsed()
    );

    // The second exit backs off 10 s: the restart comes then, not with the next relist.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let exited = tokio::time::Instant::now();
    harness.runtime.exit("app", 1);
    harness
        .status_where("restarted twice", |s| app(s)["restartCount"] == 2)
        .await;
    let waited = exited.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(12),
        "restarted when its 10 s back-off ended: {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_broken_stream_is_retried_five_times_then_the_relist_returns_to_1_s() {
    let harness = running_evented().await;
    harness.runtime.break_events();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!harness.pods.engine.core().evented, "fell back");
    assert_eq!(harness.runtime.count("GetContainerEvents"), 5);
    let before = relists(&harness);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let count = relists(&harness) - before;
    assert!((29..=31).contains(&count), "every second again: {count}");
}

#[tokio::test(start_paused = true)]
async fn without_an_event_stream_the_pleg_relists_every_second_and_asks_once() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let before = relists(&harness);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let count = relists(&harness) - before;
    assert!((29..=31).contains(&count), "every second: {count}");
    assert_eq!(harness.runtime.count("GetContainerEvents"), 1);
    assert!(!harness.pods.engine.core().evented);
}
