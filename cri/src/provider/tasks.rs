//! The engine's tasks under supervision, as the actors are under the supervisor: a panic in
//! a pod's worker is caught, logged and counted, and the pod re-armed (it syncs again after the
//! sync-error back-off, instead of staying busy forever); a panic that ends the PLEG, the event
//! stream's follower or the garbage collector restarts that task, counted. [`ProviderFault`] makes
//! the next such task panic on purpose, as the actors' kill modes do.

use std::{any::Any, future::Future, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures::FutureExt;

use super::{
    backoff::later,
    engine::{Engine, SYNC_ERROR_BACKOFF},
    task_panics::EngineTask,
};
use nodepulse_actors::{pods::ProviderFault, prober::RestartContainer};

/// How long a task that panicked waits before it runs again: a panic that repeats on every
/// run costs a log line a second, not a spinning thread.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// A panic's message, as far as it has one.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

impl Engine {
    /// Arms `fault`: the next task it names panics.
    pub fn inject_fault(&self, fault: ProviderFault) {
        tracing::warn!(?fault, "fault injection: the next such engine task panics");
        let mut core = self.core();
        match fault {
            ProviderFault::PodWorker { pod_uid } => {
                core.faults.workers.insert(pod_uid);
            }
            ProviderFault::Pleg => core.faults.pleg = true,
        }
    }

    /// Panics when a fault was armed for this round of `uid`'s worker.
    pub(super) fn worker_fault_point(&self, uid: &str) {
        let armed = self.core().faults.workers.remove(uid);
        assert!(!armed, "fault injection: pod {uid}'s worker panics");
    }

    /// Panics when a fault was armed for the PLEG's next pass.
    pub(super) fn pleg_fault_point(&self) {
        let armed = std::mem::take(&mut self.core().faults.pleg);
        assert!(!armed, "fault injection: the PLEG panics");
    }

    /// Runs `uid`'s worker; a panic is caught, and the pod re-armed.
    pub(super) fn spawn_worker(self: &Arc<Self>, uid: String) {
        let engine = Arc::clone(self);
        self.spawner.spawn(async move {
            let worker = AssertUnwindSafe(Arc::clone(&engine).worker(uid.clone()));
            if let Err(panic) = worker.catch_unwind().await {
                engine.worker_panicked(&uid, panic_message(&*panic));
            }
        });
    }

    /// The worker is gone: the pod is idle again, and syncs after the back-off of a failed
    /// sync (the PLEG's due pass starts it).
    fn worker_panicked(&self, uid: &str, message: &str) {
        let at = later(self.now(), SYNC_ERROR_BACKOFF);
        {
            let mut core = self.core();
            core.panics.pod_workers += 1;
            if let Some(entry) = core.pods.get_mut(uid) {
                entry.work.stop();
                entry.retry_at = Some(at);
            }
        }
        tracing::error!(
            pod_uid = uid,
            panic = message,
            retry_in = ?SYNC_ERROR_BACKOFF,
            "a pod worker panicked; the pod syncs again after the back-off"
        );
        self.retries_changed.notify_one();
    }

    /// Runs `task` (built afresh by `run` for each start) until it returns; a panic restarts
    /// it after [`RESTART_DELAY`], counted, unless the engine stopped.
    pub(super) fn spawn_supervised<F, Fut>(self: &Arc<Self>, task: EngineTask, run: F)
    where
        F: Fn(Arc<Self>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let engine = Arc::clone(self);
        self.spawner.spawn(async move {
            loop {
                let Err(panic) = AssertUnwindSafe(run(Arc::clone(&engine)))
                    .catch_unwind()
                    .await
                else {
                    return;
                };
                let stopped = {
                    let mut core = engine.core();
                    let panics = &mut core.panics;
                    match task {
                        EngineTask::Pleg => panics.pleg += 1,
                        EngineTask::EventedPleg => panics.evented_pleg += 1,
                        EngineTask::GarbageCollection => panics.garbage_collection += 1,
                        EngineTask::PodCgroups => panics.pod_cgroups += 1,
                    }
                    core.stopped
                };
                tracing::error!(
                    ?task,
                    panic = panic_message(&*panic),
                    "an engine task panicked; it starts again"
                );
                if stopped {
                    return;
                }
                tokio::time::sleep(RESTART_DELAY).await;
            }
        });
    }

    /// Runs a kill a probe asked for; a panic is caught and counted, not repeated (the
    /// probe's next failure asks again).
    pub(super) fn spawn_probe_kill(self: &Arc<Self>, restart: RestartContainer) {
        let engine = Arc::clone(self);
        self.spawner.spawn(async move {
            let kill = AssertUnwindSafe(Arc::clone(&engine).kill_for_probe(restart));
            if let Err(panic) = kill.catch_unwind().await {
                engine.core().panics.probe_kills += 1;
                tracing::error!(
                    panic = panic_message(&*panic),
                    "a kill a probe asked for panicked"
                );
            }
        });
    }
}
