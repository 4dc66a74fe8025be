//! Pod sandboxes are made a few at a time (`SANDBOXES_AT_ONCE_PER_CORE` for each core, or
//! `maxParallelSandboxes`): in a burst, the pods beyond that wait for a turn while the runtime
//! is slow to answer, no pod is left behind once it answers, and a pod deleted while it waited
//! gets no sandbox.

use std::{sync::Arc, time::Duration};

use serde_json::json;
use tokio::sync::watch;

use super::{
    engine::default_sandboxes_at_once,
    tests::{Harness, IMAGE, deleted, pod},
};
use nodepulse_actors::{
    pods::PodLifecycleProvider,
    ports::fakes::{container_runtime::FakeRuntime, paused_wall_clock},
};

fn numbered(index: usize) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = pod("Always", json!({}));
    pod.metadata.name = Some(format!("web-{index}"));
    pod.metadata.uid = Some(format!("u{index}"));
    pod
}

/// Ticks the provider (paused time) until `done` holds.
async fn until(harness: &mut Harness, what: &str, done: impl Fn(&FakeRuntime) -> bool) {
    for _ in 0..6000 {
        let updates = harness.pods.tick(nodepulse_actors::clock::system()());
        harness.updates.extend(updates);
        if done(&harness.runtime) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// A provider given `extra` pods more than it has turns (the default's), over a runtime
/// holding its answers to RunPodSandbox, once every turn is taken: the provider, the runtime,
/// its gate and the turns.
async fn held_burst(extra: usize) -> (Harness, Arc<FakeRuntime>, watch::Sender<bool>, usize) {
    held_burst_of(default_sandboxes_at_once(), extra).await
}

/// [`held_burst`] with `turns` configured.
async fn held_burst_of(
    turns: usize,
    extra: usize,
) -> (Harness, Arc<FakeRuntime>, watch::Sender<bool>, usize) {
    let runtime = Arc::new(FakeRuntime::new(paused_wall_clock()).with_image(IMAGE));
    let answer = runtime.hold_sandboxes();
    let mut harness = Harness::over_settings(Arc::clone(&runtime), |settings| {
        settings.sandboxes_at_once = turns;
    });
    for index in 0..turns + extra {
        harness.apply(&numbered(index));
    }
    until(&mut harness, "every turn is taken", |runtime| {
        runtime.sandboxes_held() == turns
    })
    .await;
    (harness, runtime, answer, turns)
}

#[tokio::test(start_paused = true)]
async fn a_burst_gets_its_sandboxes_a_few_at_a_time_and_every_pod_runs() {
    let (harness, runtime, answer, turns) = held_burst(3).await;
    a_burst_runs_in_turns(harness, runtime, answer, turns, 3).await;
}

#[tokio::test(start_paused = true)]
async fn max_parallel_sandboxes_sets_the_number_of_turns() {
    // Odd, so never the default (two a core).
    let (harness, runtime, answer, turns) = held_burst_of(3, 2).await;
    assert_ne!(turns, default_sandboxes_at_once());
    a_burst_runs_in_turns(harness, runtime, answer, turns, 2).await;
}

/// With every turn taken and `extra` more pods waiting, no more sandboxes are asked for until
/// the runtime answers; then every pod gets one and runs.
async fn a_burst_runs_in_turns(
    mut harness: Harness,
    runtime: Arc<FakeRuntime>,
    answer: watch::Sender<bool>,
    turns: usize,
    extra: usize,
) {
    let count = turns + extra;
    // Ten relists and retries later, the runtime still has no more to answer.
    tokio::time::sleep(Duration::from_secs(10)).await;
    until(&mut harness, "the provider ticked", |_| true).await;
    assert_eq!(
        runtime.count("RunPodSandbox"),
        turns,
        "{:?}",
        runtime.calls()
    );
    assert_eq!(runtime.count("StartContainer"), 0);
    assert_eq!(
        harness.pods.debug_state()["sandboxTurns"],
        json!({"atOnce": turns, "inUse": turns, "waiting": extra}),
        "the debug state shows the turns held and the pods waiting"
    );

    answer.send(true).expect("the runtime's gate");
    until(&mut harness, "every pod's container started", |runtime| {
        runtime.count("StartContainer") == count
    })
    .await;
    assert_eq!(runtime.count("RunPodSandbox"), count, "one sandbox a pod");
    assert_eq!(
        harness.pods.debug_state()["sandboxTurns"],
        json!({"atOnce": turns, "inUse": 0, "waiting": 0}),
        "every turn given back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_deleted_while_waiting_for_its_turn_gets_no_sandbox() {
    let (mut harness, runtime, answer, turns) = held_burst(0).await;
    let waiting = numbered(turns);
    harness.apply(&waiting);
    tokio::time::sleep(Duration::from_secs(1)).await;
    harness.apply(&deleted(&waiting, 30));

    answer.send(true).expect("the runtime's gate");
    until(&mut harness, "the others' containers started", |runtime| {
        runtime.count("StartContainer") == turns
    })
    .await;
    harness.wait_terminated().await;
    let name = format!("RunPodSandbox web-{turns}");
    assert!(
        !runtime.calls().contains(&name),
        "the deleted pod got a sandbox: {:?}",
        runtime.calls()
    );
}
