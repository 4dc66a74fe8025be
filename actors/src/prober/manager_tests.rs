//! The ProberManager's test harness (a scripted runner, paused tokio time) and its outcome
//! tests: readiness published and flipped at the thresholds, liveness and startup restarts
//! with the kubelet's texts and grace, and startup gating.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use k8s_openapi::api::core::v1::{Container, ExecAction, Pod, PodSpec, PodStatus, Probe};
use nodepulse_supervisor::Kept;
use tokio::{sync::mpsc, time::Instant};

use super::{ProbeKind, ProberManager, ProberMemory, ProberOutput, Reported, RunningContainer};
use crate::{
    messages::SetContainerReadiness,
    ports::{ProbeAction, ProbeOutcome, ProbeRunner, ProbeTarget},
};

/// Answers each probe (by its exec command) with the outcome the test set, and logs runs.
#[derive(Default, Clone)]
pub(super) struct ScriptedRunner {
    pub(super) outcomes: Arc<Mutex<BTreeMap<String, ProbeOutcome>>>,
    pub(super) runs: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl ScriptedRunner {
    pub(super) fn set(&self, probe: &str, outcome: ProbeOutcome) {
        self.outcomes.lock().unwrap().insert(probe.into(), outcome);
    }
    pub(super) fn runs_of(&self, probe: &str) -> Vec<Instant> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .filter(|(p, _)| p == probe)
            .map(|(_, at)| *at)
            .collect()
    }
}

impl ProbeRunner for ScriptedRunner {
    fn run(&self, target: ProbeTarget) -> BoxFuture<'static, ProbeOutcome> {
        let ProbeAction::Exec { command } = target.action else {
            panic!("exec only")
        };
        self.runs
            .lock()
            .unwrap()
            .push((command[0].clone(), Instant::now()));
        let outcomes = self.outcomes.lock().unwrap();
        let outcome = outcomes.get(&command[0]).cloned();
        futures::future::ready(outcome.unwrap_or(ProbeOutcome::Failure("unset".into()))).boxed()
    }
}

pub(super) fn probe(name: &str, failure_threshold: i32) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec![name.into()]),
        }),
        period_seconds: Some(10),
        failure_threshold: Some(failure_threshold),
        ..Default::default()
    }
}

pub(super) fn pod(container: Container, restart_policy: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.uid = Some("uid-1".into());
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "app".into(),
            ..container
        }],
        restart_policy: Some(restart_policy.into()),
        termination_grace_period_seconds: Some(45),
        ..Default::default()
    });
    pod.status = Some(PodStatus {
        pod_ip: Some("10.0.0.9".into()),
        ..Default::default()
    });
    pod
}

pub(super) fn running(id: &str) -> RunningContainer {
    RunningContainer {
        name: "app".into(),
        container_id: id.into(),
        started_at: Instant::now(),
        reported: Reported::default(),
    }
}

pub(super) struct Harness {
    pub(super) runner: ScriptedRunner,
    pub(super) memory: Kept<ProberMemory>,
    pub(super) rx: mpsc::Receiver<ProberOutput>,
    pub(super) manager: ProberManager,
}

pub(super) fn harness() -> Harness {
    let runner = ScriptedRunner::default();
    let memory = Kept::<ProberMemory>::default();
    let (tx, rx) = mpsc::channel(64);
    let manager = ProberManager::new(Arc::new(runner.clone()), memory.clone(), tx);
    Harness {
        runner,
        memory,
        rx,
        manager,
    }
}

impl Harness {
    /// The next output that is not an event.
    pub(super) async fn next_decision(&mut self) -> ProberOutput {
        loop {
            match self.rx.recv().await.expect("prober output") {
                ProberOutput::Event { .. } => continue,
                other => return other,
            }
        }
    }
    pub(super) async fn quiet_for(&mut self, seconds: u64) -> bool {
        tokio::time::timeout(Duration::from_secs(seconds), self.next_decision())
            .await
            .is_err()
    }
}

pub(super) fn readiness(id: &str, ready: bool) -> ProberOutput {
    ProberOutput::Readiness(SetContainerReadiness {
        pod_uid: "uid-1".into(),
        container_id: id.into(),
        ready,
    })
}

#[tokio::test(start_paused = true)]
async fn readiness_is_false_until_the_first_success_then_flips_at_the_failure_threshold() {
    let mut h = harness();
    let container = Container {
        readiness_probe: Some(probe("ready", 3)),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Failure("no".into()));
    assert!(
        h.manager
            .add_pod(&pod(container, "Always"), &[running("c1")])
            .is_empty()
    );
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert!(
        h.quiet_for(35).await,
        "failures on a not-ready container publish nothing new"
    );
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    assert_eq!(h.next_decision().await, readiness("c1", true));
    h.runner.set(
        "ready",
        ProbeOutcome::Failure("HTTP probe failed with statuscode: 503".into()),
    );
    let flipped_at = Instant::now();
    let mut events = Vec::new();
    loop {
        match h.rx.recv().await.unwrap() {
            ProberOutput::Event { event, .. } => events.push(event.message),
            decision => {
                assert_eq!(decision, readiness("c1", false));
                break;
            }
        }
    }
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(
        events[0],
        "Readiness probe failed: HTTP probe failed with statuscode: 503"
    );
    let waited = Instant::now() - flipped_at;
    assert!(
        waited > Duration::from_secs(20) && waited <= Duration::from_secs(30),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_past_the_threshold_requests_a_restart_with_the_probe_grace() {
    let mut h = harness();
    let mut liveness = probe("live", 2);
    liveness.termination_grace_period_seconds = Some(7);
    let container = Container {
        liveness_probe: Some(liveness),
        ..Default::default()
    };
    h.manager
        .add_pod(&pod(container, "Always"), &[running("c1")]);
    let ProberOutput::Restart(restart) = h.next_decision().await else {
        panic!("restart")
    };
    assert_eq!(
        restart.killing_message,
        "Container app failed liveness probe, will be restarted"
    );
    assert_eq!(
        (restart.grace_period_seconds, restart.kind),
        (7, ProbeKind::Liveness)
    );
    assert_eq!(restart.container_id, "c1");
    let runs = h.runner.runs_of("live").len();
    assert!(h.quiet_for(60).await);
    assert_eq!(
        h.runner.runs_of("live").len(),
        runs,
        "the worker holds after a kill"
    );
}

#[tokio::test(start_paused = true)]
async fn startup_failure_restarts_with_the_pod_grace_and_no_suffix_when_never_restarted() {
    let mut h = harness();
    let container = Container {
        startup_probe: Some(probe("startup", 1)),
        ..Default::default()
    };
    h.manager
        .add_pod(&pod(container, "Never"), &[running("c1")]);
    let ProberOutput::Restart(restart) = h.next_decision().await else {
        panic!("restart")
    };
    assert_eq!(
        restart.killing_message,
        "Container app failed startup probe"
    );
    assert_eq!(
        (restart.grace_period_seconds, restart.kind),
        (45, ProbeKind::Startup)
    );
}

#[tokio::test(start_paused = true)]
async fn startup_holds_off_liveness_and_readiness_until_it_succeeds() {
    let mut h = harness();
    let container = Container {
        startup_probe: Some(probe("startup", 100)),
        liveness_probe: Some(probe("live", 3)),
        readiness_probe: Some(probe("ready", 3)),
        ..Default::default()
    };
    h.runner.set("live", ProbeOutcome::Success(String::new()));
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    h.manager
        .add_pod(&pod(container, "Always"), &[running("c1")]);
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert!(h.quiet_for(60).await);
    assert!(h.runner.runs_of("live").is_empty() && h.runner.runs_of("ready").is_empty());
    assert!(h.runner.runs_of("startup").len() >= 5);
    h.runner
        .set("startup", ProbeOutcome::Success(String::new()));
    let started = ProberOutput::Started {
        pod_uid: "uid-1".into(),
        container_id: "c1".into(),
    };
    assert_eq!(h.next_decision().await, started);
    assert_eq!(h.next_decision().await, readiness("c1", true));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        !h.runner.runs_of("live").is_empty(),
        "liveness runs once started"
    );
}

#[tokio::test(start_paused = true)]
async fn readiness_runs_at_once_when_the_startup_probe_succeeds() {
    let mut h = harness();
    let mut slow_readiness = probe("ready", 3);
    slow_readiness.period_seconds = Some(3600);
    let container = Container {
        startup_probe: Some(probe("startup", 100)),
        readiness_probe: Some(slow_readiness),
        ..Default::default()
    };
    h.runner.set("ready", ProbeOutcome::Success(String::new()));
    h.manager
        .add_pod(&pod(container, "Always"), &[running("c1")]);
    assert_eq!(h.next_decision().await, readiness("c1", false));
    assert!(h.quiet_for(30).await);
    h.runner
        .set("startup", ProbeOutcome::Success(String::new()));
    let started = ProberOutput::Started {
        pod_uid: "uid-1".into(),
        container_id: "c1".into(),
    };
    assert_eq!(h.next_decision().await, started);
    let succeeded = Instant::now();
    assert_eq!(h.next_decision().await, readiness("c1", true));
    assert!(
        succeeded.elapsed() < Duration::from_secs(1),
        "ready {:?} after startup, not at the readiness probe's next period",
        succeeded.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_sidecars_readiness_probe_runs_like_a_regular_containers() {
    let mut h = harness();
    let mut pod = pod(Container::default(), "Never");
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![Container {
        name: "proxy".into(),
        restart_policy: Some("Always".into()),
        readiness_probe: Some(probe("proxy-ready", 3)),
        ..Default::default()
    }]);
    h.runner
        .set("proxy-ready", ProbeOutcome::Success(String::new()));
    let proxy = RunningContainer {
        name: "proxy".into(),
        ..running("s1")
    };
    assert!(h.manager.add_pod(&pod, &[proxy]).is_empty());
    let first_two = tokio::time::timeout(Duration::from_secs(60), async {
        (h.next_decision().await, h.next_decision().await)
    })
    .await
    .expect("the sidecar has a readiness worker");
    assert_eq!(first_two, (readiness("s1", false), readiness("s1", true)));
}
