//! `ProberManager`: one tokio task per (pod UID, container, probe kind), started when a
//! container starts and aborted when it stops or the pod goes. Results live in a `Kept`
//! map outside the manager, so a restarted prober resumes each worker where it was and never
//! re-publishes an initial not-ready for a container it had already found ready. A startup
//! probe's success wakes the container's readiness worker at once, as the kubelet's manual
//! trigger does, instead of leaving it to its next period.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{Container, Pod};
use nodepulse_supervisor::Kept;
use tokio::{
    sync::{Notify, mpsc},
    task::JoinHandle,
    time::Instant,
};

use super::{
    output::{ProberOutput, WorkerContext},
    spec::{ProbeKind, ProbeSettings, ProbeSpecError, probe_target},
    worker::{ProbeResult, Reported, WorkerMemory, first_delay, record, should_probe},
};
use crate::ports::{ProbeOutcome, ProbeRunner};

/// The kubelet retries a probe that could not run this many times within one tick.
const MAX_PROBE_RETRIES: usize = 3;

/// Which worker: a container's probe of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerKey {
    pub pod_uid: String,
    pub container: String,
    pub kind: ProbeKind,
}

/// Every worker's memory, kept across prober restarts.
pub type ProberMemory = BTreeMap<WorkerKey, WorkerMemory>;

/// A running container as the pod's status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningContainer {
    pub name: String,
    /// `containerStatuses[].containerID`.
    pub container_id: String,
    /// `state.running.startedAt` on the tokio clock (for `initialDelaySeconds`).
    pub started_at: Instant,
    /// What the API's status already says of this container (`ready`, `started`): a prober
    /// that lost its results (a daemon restart) resumes from it instead of flipping it (§5.5).
    pub reported: Reported,
}

pub struct ProberManager {
    runner: Arc<dyn ProbeRunner>,
    memory: Kept<ProberMemory>,
    output: mpsc::Sender<ProberOutput>,
    up_since: Instant,
    workers: BTreeMap<WorkerKey, Worker>,
    /// Per (pod UID, container): the startup worker's success wakes the readiness worker.
    started: BTreeMap<(String, String), Arc<Notify>>,
}

/// A running worker task and the container it probes.
struct Worker {
    container_id: String,
    task: JoinHandle<()>,
}

impl ProberManager {
    pub fn new(
        runner: Arc<dyn ProbeRunner>,
        memory: Kept<ProberMemory>,
        output: mpsc::Sender<ProberOutput>,
    ) -> Self {
        Self {
            runner,
            memory,
            output,
            up_since: Instant::now(),
            workers: BTreeMap::new(),
            started: BTreeMap::new(),
        }
    }

    /// Brings `pod`'s workers in line with its `running` containers; call it at every pod
    /// sync. Workers start for containers that have none, restart from the initial results
    /// for a container with a new ID, and stop for containers no longer running. A probe
    /// whose spec cannot run is skipped and returned, the others still start.
    pub fn add_pod(&mut self, pod: &Pod, running: &[RunningContainer]) -> Vec<ProbeSpecError> {
        let mut errors = Vec::new();
        let uid = pod_uid(pod);
        self.stop_where(|key, container_id| {
            key.pod_uid == uid
                && !running
                    .iter()
                    .any(|r| r.name == key.container && r.container_id == container_id)
        });
        let Some(spec) = &pod.spec else { return errors };
        // Regular containers and sidecars (restartable init containers) are probed alike.
        let sidecars = (spec.init_containers.iter().flatten())
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        for container in spec.containers.iter().chain(sidecars) {
            let Some(state) = running.iter().find(|r| r.name == container.name) else {
                continue;
            };
            for kind in [
                ProbeKind::Startup,
                ProbeKind::Readiness,
                ProbeKind::Liveness,
            ] {
                if let Err(error) = self.start_worker(pod, container, state, kind) {
                    errors.push(error);
                }
            }
        }
        errors
    }

    /// Stops the pod's workers and forgets their results.
    pub fn remove_pod(&mut self, pod_uid: &str) {
        self.stop_where(|key, _| key.pod_uid == pod_uid);
        self.started.retain(|(uid, _), _| uid != pod_uid);
        self.memory
            .update(|memory| memory.retain(|key, _| key.pod_uid != pod_uid));
    }

    /// Each worker's memory (last result, consecutive counts, next run) for `/debug/`.
    pub fn snapshot(&self) -> Vec<(WorkerKey, WorkerMemory)> {
        self.memory.read(|memory| {
            (memory.iter())
                .filter(|(key, _)| self.workers.contains_key(key))
                .map(|(key, memory)| (key.clone(), memory.clone()))
                .collect()
        })
    }

    fn stop_where(&mut self, matches: impl Fn(&WorkerKey, &str) -> bool) {
        self.workers.retain(|key, worker| {
            let stop = matches(key, &worker.container_id);
            if stop {
                worker.task.abort();
            }
            !stop
        });
    }

    fn start_worker(
        &mut self,
        pod: &Pod,
        container: &Container,
        running: &RunningContainer,
        kind: ProbeKind,
    ) -> Result<(), ProbeSpecError> {
        let Some(probe) = kind.of(container) else {
            return Ok(());
        };
        let key = WorkerKey {
            pod_uid: pod_uid(pod),
            container: container.name.clone(),
            kind,
        };
        if self
            .workers
            .get(&key)
            .is_some_and(|w| !w.task.is_finished())
        {
            return Ok(());
        }
        let started = Arc::clone(
            self.started
                .entry((key.pod_uid.clone(), key.container.clone()))
                .or_default(),
        );
        let pod_ip = (pod.status.as_ref())
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let context = WorkerContext {
            key: key.clone(),
            settings: ProbeSettings::of(probe),
            target: probe_target(probe, container, &running.container_id, &pod_ip)?,
            started_at: running.started_at,
            has_startup_probe: container.startup_probe.is_some(),
            restart_never: pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref())
                == Some("Never"),
            reported: running.reported,
            pod_grace_seconds: pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds),
            started,
        };
        let delay = first_delay(
            context.settings.period,
            self.up_since.elapsed(),
            rand::random(),
        );
        let task = run_worker(
            context,
            delay,
            self.runner.clone(),
            self.memory.clone(),
            self.output.clone(),
        );
        let worker = Worker {
            container_id: running.container_id.clone(),
            task: tokio::spawn(task),
        };
        self.workers.insert(key, worker);
        Ok(())
    }
}

impl Drop for ProberManager {
    fn drop(&mut self) {
        self.stop_where(|_, _| true);
    }
}

fn pod_uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

async fn run_worker(
    context: WorkerContext,
    first_delay: Duration,
    runner: Arc<dyn ProbeRunner>,
    memory: Kept<ProberMemory>,
    output: mpsc::Sender<ProberOutput>,
) {
    let (key, settings) = (&context.key, &context.settings);
    let container_id = &context.target.container_id;
    // Kept results for this very container survive; a new container starts from the initial
    // result (or what the API already reports), and readiness publishes not-ready until the
    // first success.
    let fresh = memory.update(|memory| {
        let previous = memory.get(key);
        let kept = previous.is_some_and(|m| &m.container_id == container_id);
        if !kept {
            let mut initial =
                WorkerMemory::new(key.kind, container_id).resumed(key.kind, context.reported);
            initial.totals = previous.map(|m| m.totals).unwrap_or_default();
            memory.insert(key.clone(), initial);
        }
        !kept
    });
    if fresh && key.kind == ProbeKind::Readiness && !context.reported.ready {
        let _ = output.send(context.readiness(false)).await;
    }
    let mut next = Instant::now() + first_delay;
    loop {
        memory.update(|memory| {
            if let Some(m) = memory.get_mut(key) {
                m.next_run = Some(next);
            }
        });
        if key.kind == ProbeKind::Readiness {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = context.started.notified() => {}
            }
        } else {
            tokio::time::sleep_until(next).await;
        }
        let started = !context.has_startup_probe
            || context.reported.started
            || context.startup_succeeded(&memory);
        let current = memory.read(|memory| memory.get(key).cloned());
        let Some(current) = current else { return };
        let now = Instant::now();
        next = now + settings.period;
        if should_probe(
            key.kind,
            &current,
            settings,
            context.started_at,
            started,
            now,
        )
        .is_err()
        {
            continue;
        }
        let mut outcome = runner.run(context.target.clone()).await;
        for _ in 1..MAX_PROBE_RETRIES {
            if !matches!(outcome, ProbeOutcome::Unknown(_)) {
                break;
            }
            outcome = runner.run(context.target.clone()).await;
        }
        let recorded = memory.update(|memory| {
            memory
                .get_mut(key)
                .map(|m| record(key.kind, m, settings, &outcome))
        });
        let Some(recorded) = recorded else { return };
        if key.kind == ProbeKind::Startup && recorded.published == Some(ProbeResult::Success) {
            context.started.notify_one();
        }
        for message in context.outputs(recorded) {
            let _ = output.send(message).await;
        }
    }
}
