//! ProberActor under its supervisor, on paused time with a scripted runner: readiness reaches
//! StatusManager and the provider in order even through full mailboxes, and an instance
//! stopped or panicked resumes every worker from the kept results without publishing a
//! not-ready for a container it had found ready (a hang needs threads of its own, so real
//! time: `tests/it/probes.rs` kills the prober in every mode on a real node).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::Container;
use nodepulse_supervisor::{
    ChildSpec, ChildState, KillMode, Recipient, SendError, Supervisor, SupervisorConfig,
};

use super::{
    ProbePods, ProberActor, ProberFeedback, ProberKept, ProberOutput, ProberPeers,
    manager_tests::{ScriptedRunner, pod, probe, running},
};
use crate::{
    messages::SetContainerReadiness,
    ports::{ProbeOutcome, fakes::eventually},
};

const BUDGET: Duration = Duration::from_secs(120);

/// What each peer received, and how many sends it refuses as full first.
#[derive(Clone, Default)]
struct Peers {
    readiness: Arc<Mutex<Vec<bool>>>,
    feedback: Arc<Mutex<Vec<ProberOutput>>>,
    refuse: Arc<Mutex<usize>>,
}

impl Peers {
    fn recipients(&self) -> ProberPeers {
        let (readiness, refuse) = (self.readiness.clone(), self.refuse.clone());
        let feedback = self.feedback.clone();
        ProberPeers {
            status_manager: Recipient::from_fn(move |message: SetContainerReadiness| {
                let mut refuse = refuse.lock().unwrap();
                if *refuse > 0 {
                    *refuse -= 1;
                    return Err(SendError::Full(message));
                }
                readiness.lock().unwrap().push(message.ready);
                Ok(())
            }),
            provider: Recipient::from_fn(move |ProberFeedback(output)| {
                feedback.lock().unwrap().push(output);
                Ok(())
            }),
        }
    }

    fn readiness(&self) -> Vec<bool> {
        self.readiness.lock().unwrap().clone()
    }
}

fn start(
    runner: &ScriptedRunner,
    peers: &Peers,
) -> (
    nodepulse_supervisor::SupervisorHandle,
    nodepulse_supervisor::Mailbox<ProberActor>,
) {
    let mut config = SupervisorConfig::new("worker-1");
    config.same_thread = true;
    let (mailbox, inbox) = nodepulse_supervisor::mailbox::<ProberActor>(16);
    let (runner, kept, peers) = (
        Arc::new(runner.clone()),
        ProberKept::default(),
        peers.recipients(),
    );
    let factory = move || ProberActor::new(runner.clone(), kept.clone(), peers.clone());
    let supervisor = Supervisor::builder(config)
        .child(ChildSpec::new(super::NAME, inbox, factory))
        .start();
    (supervisor, mailbox)
}

fn ready_pod() -> ProbePods {
    let container = Container {
        readiness_probe: Some(probe("ready", 1)),
        ..Container::default()
    };
    ProbePods::Sync {
        pod: Arc::new(pod(container, "Always")),
        running: vec![running("containerd://a")],
    }
}

#[actix_rt::test]
async fn readiness_reaches_status_manager_in_order_through_a_full_mailbox() {
    tokio::time::pause();
    let runner = ScriptedRunner::default();
    runner.set("ready", ProbeOutcome::Success(String::new()));
    let peers = Peers::default();
    *peers.refuse.lock().unwrap() = 3;
    let (_supervisor, mailbox) = start(&runner, &peers);
    mailbox.send(ready_pod()).await.expect("delivered");
    eventually("not ready, then ready, arrive", BUDGET, || {
        peers.readiness() == [false, true]
    })
    .await;
    let feedback = peers.feedback.lock().unwrap().clone();
    let ready: Vec<bool> = (feedback.iter())
        .filter_map(|o| match o {
            ProberOutput::Readiness(r) => Some(r.ready),
            _ => None,
        })
        .collect();
    assert_eq!(ready, [false, true], "the provider hears readiness too");
}

#[actix_rt::test]
async fn a_stopped_or_panicked_prober_resumes_its_workers_and_never_says_not_ready() {
    tokio::time::pause();
    let runner = ScriptedRunner::default();
    runner.set("ready", ProbeOutcome::Success(String::new()));
    let peers = Peers::default();
    let (supervisor, mailbox) = start(&runner, &peers);
    mailbox.send(ready_pod()).await.expect("delivered");
    eventually("ready", BUDGET, || peers.readiness() == [false, true]).await;
    for (round, mode) in [KillMode::Stop, KillMode::Panic].into_iter().enumerate() {
        let probes = runner.runs_of("ready").len();
        supervisor
            .kill(super::NAME, mode)
            .await
            .expect("kill accepted");
        eventually(&format!("a new instance after {mode:?}"), BUDGET, || {
            supervisor.actor(super::NAME).is_some_and(|actor| {
                actor.state == ChildState::Running && actor.restarts == round as u64 + 1
            })
        })
        .await;
        // Nobody sends the pod again: the new instance replays it and probes on.
        eventually(&format!("probes run again after {mode:?}"), BUDGET, || {
            runner.runs_of("ready").len() > probes + 1
        })
        .await;
    }
    assert_eq!(
        peers.readiness(),
        [false, true],
        "no not-ready after a restart"
    );
    runner.set("ready", ProbeOutcome::Failure("gone".into()));
    eventually("not ready once the probe fails", BUDGET, || {
        peers.readiness() == [false, true, false]
    })
    .await;
}
