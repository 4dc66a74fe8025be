//! The ProberManager's lifecycle on paused time: retries within a tick, the initial delay and
//! the first probe's jitter, results kept across a prober restart, a replaced container, and a
//! removed pod.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Container;
use tokio::{sync::mpsc, time::Instant};

use super::{
    ProbeResult, ProberManager, ProberOutput, Reported, RunningContainer,
    manager_tests::{harness, pod, probe, readiness, running},
};
use crate::ports::{ProbeError, ProbeOutcome};

#[tokio::test(start_paused = true)]
async fn a_probe_that_cannot_run_is_retried_three_times_within_one_tick() {
    let mut h = harness();
    let container = Container {
        readiness_probe: Some(probe("ready", 1)),
        ..Default::default()
    };
    let error = ProbeOutcome::Unknown(ProbeError::Exec("runtime unavailable".into()));
    h.runner.set("ready", error);
    h.manager
        .add_pod(&pod(container, "Always"), &[running("c1")]);
    assert_eq!(h.next_decision().await, readiness("c1", false));
    let ProberOutput::Event { event, .. } = h.rx.recv().await.unwrap() else {
        panic!("event")
    };
    assert_eq!(
        event.message,
        "Readiness probe errored and resulted in Failure state: exec: runtime unavailable"
    );
    let runs = h.runner.runs_of("ready");
    assert_eq!(runs.len(), 3);
    assert!(
        runs.iter().all(|at| *at == runs[0]),
        "all three in one tick"
    );
}

#[tokio::test(start_paused = true)]
async fn initial_delay_and_jitter_bound_the_first_probe() {
    let mut h = harness();
    let mut readiness_probe = probe("ready", 3);
    readiness_probe.initial_delay_seconds = Some(25);
    let container = Container {
        readiness_probe: Some(readiness_probe),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    let started = running("c1");
    h.manager
        .add_pod(&pod(container, "Always"), std::slice::from_ref(&started));
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert_eq!(h.next_decision().await, readiness("c1", true));
    let first = h.runner.runs_of("ready")[0];
    let since_start = first - started.started_at;
    assert!(
        since_start >= Duration::from_secs(25) && since_start < Duration::from_secs(35),
        "{since_start:?}"
    );
    // With no initial delay, the jittered first probe lands within one period.
    let mut h = harness();
    let container = Container {
        liveness_probe: Some(probe("live", 3)),
        ..Default::default()
    };
    h.runner.set("live", ProbeOutcome::Success(String::new()));
    let added = Instant::now();
    h.manager
        .add_pod(&pod(container, "Always"), &[running("c1")]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let runs = h.runner.runs_of("live");
    assert_eq!(runs.len(), 1, "exactly one probe in the first period");
    assert!(runs[0] - added < Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_restarted_prober_keeps_a_ready_container_ready_while_it_reprobes() {
    let mut h = harness();
    let container = Container {
        readiness_probe: Some(probe("ready", 3)),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    let pod = pod(container, "Always");
    h.manager.add_pod(&pod, &[running("c1")]);
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert_eq!(h.next_decision().await, readiness("c1", true));
    drop(h.manager);
    let (tx, mut rx) = mpsc::channel(64);
    let mut manager = ProberManager::new(Arc::new(h.runner.clone()), h.memory.clone(), tx);
    manager.add_pod(&pod, &[running("c1")]);
    let snapshot = manager.snapshot();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].1.published, Some(ProbeResult::Success));
    let before = h.runner.runs_of("ready").len();
    let quiet = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
    assert!(
        quiet.is_err(),
        "no not-ready flip after the restart: {quiet:?}"
    );
    assert!(h.runner.runs_of("ready").len() > before, "it did re-probe");
    let next_run = manager.snapshot()[0].1.next_run.expect("next run known");
    assert!(next_run > Instant::now());
}

#[tokio::test(start_paused = true)]
async fn a_new_container_id_starts_from_not_ready_and_stopped_or_removed_ones_stop_probing() {
    let mut h = harness();
    let container = Container {
        readiness_probe: Some(probe("ready", 3)),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    let pod = pod(container, "Always");
    h.manager.add_pod(&pod, &[running("c1")]);
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert_eq!(h.next_decision().await, readiness("c1", true));
    h.manager.add_pod(&pod, &[running("c2")]);
    assert_eq!(h.next_decision().await, readiness("c2", false));
    assert_eq!(h.next_decision().await, readiness("c2", true));
    h.manager.add_pod(&pod, &[]);
    let runs = h.runner.runs_of("ready").len();
    assert!(h.quiet_for(60).await);
    assert_eq!(
        h.runner.runs_of("ready").len(),
        runs,
        "a stopped container is not probed"
    );
    h.manager.add_pod(&pod, &[running("c3")]);
    assert_eq!(h.next_decision().await, readiness("c3", false));
    assert_eq!(h.next_decision().await, readiness("c3", true));
    h.manager.remove_pod("uid-1");
    let runs = h.runner.runs_of("ready").len();
    assert!(h.quiet_for(60).await);
    assert_eq!(h.runner.runs_of("ready").len(), runs);
    assert!(h.manager.snapshot().is_empty() && h.memory.read(|m| m.is_empty()));
}

#[tokio::test(start_paused = true)]
async fn a_prober_without_results_resumes_from_what_the_api_reports() {
    let mut h = harness();
    let container = Container {
        startup_probe: Some(probe("startup", 1)),
        readiness_probe: Some(probe("ready", 3)),
        liveness_probe: Some(probe("live", 3)),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    h.runner.set("live", ProbeOutcome::Success(String::new()));
    let reported = Reported {
        ready: true,
        started: true,
    };
    let container_state = RunningContainer {
        reported,
        ..running("c1")
    };
    h.manager
        .add_pod(&pod(container, "Always"), &[container_state]);
    assert!(
        h.quiet_for(60).await,
        "neither not-ready nor a startup restart"
    );
    assert!(
        h.runner.runs_of("startup").is_empty(),
        "a started container is not re-gated"
    );
    assert!(!h.runner.runs_of("live").is_empty() && !h.runner.runs_of("ready").is_empty());
    h.runner.set("ready", ProbeOutcome::Failure("down".into()));
    assert_eq!(h.next_decision().await, readiness("c1", false));
}

#[tokio::test(start_paused = true)]
async fn a_full_output_channel_blocks_only_the_workers_not_the_manager() {
    let runner = super::manager_tests::ScriptedRunner::default();
    runner.set("ready", ProbeOutcome::Failure("down".into()));
    let (tx, mut rx) = mpsc::channel(1);
    let memory = nodepulse_supervisor::Kept::<super::ProberMemory>::default();
    let mut manager = ProberManager::new(Arc::new(runner.clone()), memory, tx);
    let container = Container {
        readiness_probe: Some(probe("ready", 1)),
        ..Default::default()
    };
    let mut pods = Vec::new();
    for n in 0..20 {
        let mut pod = pod(container.clone(), "Always");
        pod.metadata.uid = Some(format!("uid-{n}"));
        manager.add_pod(&pod, &[running(&format!("c{n}"))]);
        pods.push(pod);
    }
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        manager.snapshot().len(),
        20,
        "every worker is alive while blocked"
    );
    for pod in &pods {
        manager.remove_pod(pod.metadata.uid.as_deref().unwrap());
    }
    assert!(manager.snapshot().is_empty());
    // The one queued message drains; the aborted workers send nothing more.
    assert!(rx.recv().await.is_some());
    let rest = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
    assert!(rest.is_err(), "{rest:?}");
}
