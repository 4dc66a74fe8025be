//! ProberActor: the supervised home of the `ProberManager`. The pod provider tells it each
//! pod's running containers at every sync (`ProbePods`); it routes what the workers publish —
//! readiness to StatusManager, and every output to the provider (its status, kills, events).
//! The results, the pods, the workers' output channel and what is not yet delivered live in
//! `ProberKept`, so a restarted instance resumes every worker where it was, re-publishes
//! nothing and loses nothing published.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use actix::{Actor, AsyncContext, Context, Handler, Message, StreamHandler};
use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::{Kept, Recipient, SendError, SupervisedActor};
use tokio::sync::mpsc;

use super::{
    debug::workers_json,
    manager::{ProberManager, ProberMemory, RunningContainer},
    output::ProberOutput,
};
use crate::{
    clock::{self, WallClock},
    messages::SetContainerReadiness,
    ports::ProbeRunner,
};

/// How many outputs the workers may have waiting for the actor.
const OUTPUT_CAPACITY: usize = 1024;
/// How soon a delivery refused by a full mailbox is tried again.
const RETRY_FULL: Duration = Duration::from_millis(20);

/// Pod provider → ProberActor: a pod's running containers at a sync, or its end.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub enum ProbePods {
    /// Call at every pod sync; containers not listed have their workers stopped.
    Sync {
        pod: Arc<Pod>,
        running: Vec<RunningContainer>,
    },
    /// The pod is being torn down or is gone: its workers stop, its results are forgotten.
    Gone { pod_uid: String },
}

/// ProberActor → pod provider: what a worker published (its status, a kill, an event).
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct ProberFeedback(pub ProberOutput);

/// Where the prober's outputs go.
#[derive(Clone)]
pub struct ProberPeers {
    pub status_manager: Recipient<SetContainerReadiness>,
    pub provider: Recipient<ProberFeedback>,
}

/// One message not yet delivered.
#[derive(Debug, Clone)]
enum Delivery {
    StatusManager(SetContainerReadiness),
    Provider(ProberFeedback),
}

/// A pod's last `Sync`: the pod and its running containers.
type SyncedPod = (Arc<Pod>, Vec<RunningContainer>);

/// The workers' outputs: one channel for every instance, so what a worker published and an
/// instance had not read when it was stopped, panicked or hung is read by the next one (a lost
/// `Restart` would leave a failed liveness probe held with nobody to act on it).
#[derive(Clone)]
struct Outputs {
    sender: mpsc::Sender<ProberOutput>,
    /// Locked only while one instance's stream waits on it; `recv` is cancel-safe, so an
    /// instance dropped mid-wait loses nothing.
    receiver: Arc<tokio::sync::Mutex<mpsc::Receiver<ProberOutput>>>,
}

impl Default for Outputs {
    fn default() -> Self {
        let (sender, receiver) = mpsc::channel(OUTPUT_CAPACITY);
        Self {
            sender,
            receiver: Arc::new(tokio::sync::Mutex::new(receiver)),
        }
    }
}

/// What outlives a ProberActor instance.
#[derive(Clone, Default)]
pub struct ProberKept {
    /// Every worker's results (shared read-only with the provider's status, `ProbeResults`).
    pub memory: Kept<ProberMemory>,
    /// Each pod's last `Sync`, replayed into a restarted instance's manager.
    pods: Kept<BTreeMap<String, SyncedPod>>,
    undelivered: Kept<VecDeque<Delivery>>,
    outputs: Outputs,
}

pub struct ProberActor {
    runner: Arc<dyn ProbeRunner>,
    kept: ProberKept,
    peers: ProberPeers,
    /// Made in `started`: its workers run on this instance's arbiter and end with it.
    manager: Option<ProberManager>,
    retry_scheduled: bool,
    delivered: u64,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
}

impl ProberActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl ProberActor {
    pub fn new(runner: Arc<dyn ProbeRunner>, kept: ProberKept, peers: ProberPeers) -> Self {
        Self {
            wall_clock: clock::system(),
            runner,
            kept,
            peers,
            manager: None,
            retry_scheduled: false,
            delivered: 0,
        }
    }

    fn sync(&mut self, pod: &Pod, running: &[RunningContainer]) {
        let Some(manager) = self.manager.as_mut() else {
            return;
        };
        for error in manager.add_pod(pod, running) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(pod = name, %error, "a probe cannot run; the container's other probes do");
        }
    }

    fn forget(&mut self, pod_uid: &str) {
        self.kept.pods.update(|pods| pods.remove(pod_uid));
        if let Some(manager) = self.manager.as_mut() {
            manager.remove_pod(pod_uid);
        }
    }

    /// Delivers what is queued, in order, until a mailbox is full (then tries again soon).
    fn drain(&mut self, ctx: &mut Context<Self>) {
        loop {
            let Some(next) = self.kept.undelivered.update(VecDeque::pop_front) else {
                return;
            };
            let refused = match next {
                Delivery::StatusManager(message) => (self.peers.status_manager)
                    .try_send(message)
                    .map_err(|e| refused(e, Delivery::StatusManager)),
                Delivery::Provider(message) => (self.peers.provider)
                    .try_send(message)
                    .map_err(|e| refused(e, Delivery::Provider)),
            };
            match refused {
                Ok(()) => self.delivered += 1,
                // A closed mailbox belongs to a peer that is not wired (tests of one part):
                // nobody will read it, so the message is dropped.
                Err(None) => tracing::debug!("a prober output has nobody to go to"),
                Err(Some(back)) => {
                    self.kept.undelivered.update(|queue| queue.push_front(back));
                    if !std::mem::replace(&mut self.retry_scheduled, true) {
                        ctx.run_later(RETRY_FULL, |actor, ctx| {
                            actor.retry_scheduled = false;
                            actor.drain(ctx);
                        });
                    }
                    return;
                }
            }
        }
    }
}

/// The message back when the mailbox was only full.
fn refused<M>(error: SendError<M>, back: impl FnOnce(M) -> Delivery) -> Option<Delivery> {
    match error {
        SendError::Full(message) => Some(back(message)),
        SendError::Closed(_) => None,
    }
}

impl Actor for ProberActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let receiver = Arc::clone(&self.kept.outputs.receiver);
        ctx.add_stream(futures::stream::unfold(receiver, |receiver| async move {
            let output = receiver.lock().await.recv().await;
            output.map(|output| (output, receiver))
        }));
        self.manager = Some(ProberManager::new(
            Arc::clone(&self.runner),
            self.kept.memory.clone(),
            self.kept.outputs.sender.clone(),
        ));
        // A restarted instance resumes every pod's workers from the kept results.
        for (pod, running) in self.kept.pods.get().into_values() {
            self.sync(&pod, &running);
        }
        self.drain(ctx);
    }
}

impl Handler<ProbePods> for ProberActor {
    type Result = ();

    fn handle(&mut self, message: ProbePods, _: &mut Context<Self>) {
        match message {
            ProbePods::Sync { pod, running } => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if running.is_empty() {
                    self.forget(&uid);
                    return;
                }
                self.sync(&pod, &running);
                self.kept
                    .pods
                    .update(|pods| pods.insert(uid, (pod, running)));
            }
            ProbePods::Gone { pod_uid } => self.forget(&pod_uid),
        }
    }
}

/// A worker published something: readiness also goes straight to StatusManager (as the
/// kubelet's status manager hears it); everything goes to the provider.
impl StreamHandler<ProberOutput> for ProberActor {
    fn handle(&mut self, output: ProberOutput, ctx: &mut Context<Self>) {
        self.kept.undelivered.update(|queue| {
            if let ProberOutput::Readiness(readiness) = &output {
                queue.push_back(Delivery::StatusManager(readiness.clone()));
            }
            queue.push_back(Delivery::Provider(ProberFeedback(output)));
        });
        self.drain(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl SupervisedActor for ProberActor {
    fn debug_state(&self) -> serde_json::Value {
        let workers = self.manager.as_ref().map(ProberManager::snapshot);
        let pods = self.kept.pods.read(|pods| {
            (pods.iter())
                .map(|(uid, (pod, _))| (uid.clone(), pod.metadata.clone()))
                .collect::<BTreeMap<_, _>>()
        });
        serde_json::json!({
            "pods": pods.len(),
            "delivered": self.delivered,
            "undelivered": self.kept.undelivered.read(VecDeque::len),
            "workers": workers_json(&workers.unwrap_or_default(), &pods, (self.wall_clock)()),
        })
    }
}
