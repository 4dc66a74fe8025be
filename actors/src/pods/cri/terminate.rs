//! Tearing a pod down (deleted, evicted, or gone from the API): every container stopped in
//! parallel with the grace period left, after its `preStop` exec hook (the runtime sends
//! SIGTERM, then SIGKILL) and the kubelet's Killing event, the sandboxes stopped and removed,
//! then the final status and TerminatePod — so a pod the API no longer shows has nothing left in the runtime.

use std::{sync::Arc, time::Duration};

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::{
    engine::{Ending, Engine},
    plan::{app_containers, init_containers},
    view::container_name,
};
use crate::{
    pods::provider::PodUpdate,
    ports::{ContainerState, ContainerStatus, PodEvent},
};

/// The command of container `name`'s `preStop` exec hook, if it has one.
fn pre_stop_command(pod: &Pod, name: &str) -> Option<Vec<String>> {
    let container = app_containers(pod)
        .iter()
        .chain(init_containers(pod))
        .find(|c| c.name == name)?;
    container
        .lifecycle
        .as_ref()?
        .pre_stop
        .as_ref()?
        .exec
        .as_ref()?
        .command
        .clone()
}

/// The kubelet never gives a container less than this to stop (`minimumGracePeriodInSeconds`).
const MIN_GRACE: Duration = Duration::from_secs(2);
/// `terminationGracePeriodSeconds`' API default.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace period left to the pod's containers at `now`: what remains until its
/// `deletionTimestamp` (within `deletionGracePeriodSeconds`), never under two seconds. An
/// eviction here is a hard one: the minimum.
pub fn grace_left(pod: &Pod, ending: &Ending, now: Timestamp) -> Duration {
    if matches!(ending, Ending::Evicted { .. }) {
        return MIN_GRACE;
    }
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    let full = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let left = pod
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|deadline| Duration::try_from(deadline.0.duration_since(now)).ok())
        .map_or(full, |left| left.min(full));
    left.max(MIN_GRACE)
}

impl Engine {
    pub async fn terminate(self: &Arc<Self>, uid: &str, ending: Ending) {
        let _ = self.runtime_name().await;
        if let Err(error) = self.refresh(uid).await {
            tracing::warn!(%error, uid, "cannot list the pod's containers to stop them; retrying");
            self.retry_soon(uid);
            return;
        }
        let Some((pod, runtime)) = self
            .core()
            .pods
            .get(uid)
            .map(|e| (e.pod.clone(), e.runtime.clone()))
        else {
            return;
        };
        let grace = grace_left(&pod, &ending, self.now());
        let kills = runtime
            .containers
            .iter()
            .filter(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
            .map(|c| self.kill_container(&pod, c, grace));
        join_all(kills).await;
        for sandbox in &runtime.sandboxes {
            if let Err(error) = self.runtime.stop_pod_sandbox(sandbox.id.clone()).await {
                tracing::warn!(%error, uid, "error killing pod");
                self.event(
                    &pod,
                    PodEvent::warning("FailedKillPod", format!("error killing pod: {error}")),
                );
                self.retry_soon(uid);
                return;
            }
        }
        // The containers as they ended, read before RemovePodSandbox takes them away.
        let _ = self.refresh(uid).await;
        for sandbox in &runtime.sandboxes {
            if let Err(error) = self.runtime.remove_pod_sandbox(sandbox.id.clone()).await {
                tracing::warn!(%error, uid, "RemovePodSandbox failed; the sandbox stays stopped");
            }
        }
        self.report_final(uid, &ending);
        let mut core = self.core();
        core.crash.forget(&format!("{uid}/"));
        if ending == Ending::Gone {
            core.pods.remove(uid);
        }
        drop(core);
        self.wake();
    }

    /// The kubelet's `killContainer`: the `preStop` exec hook of a running container first,
    /// waited for at most `grace`, whose whole seconds come off it (never under two seconds
    /// left); then StopContainer with what is left.
    async fn kill_container(&self, pod: &Pod, status: &ContainerStatus, grace: Duration) {
        let mut grace = grace;
        let name = container_name(status);
        self.event(
            pod,
            PodEvent::normal("Killing", format!("Stopping container {name}")),
        );
        self.wake();
        let hook = pre_stop_command(pod, name).filter(|_| status.state == ContainerState::Running);
        if let Some(command) = hook {
            let started = tokio::time::Instant::now();
            let run = self
                .runtime
                .exec_sync(status.id.clone(), command, Duration::ZERO);
            let outcome = tokio::time::timeout(grace, run).await;
            match &outcome {
                Ok(Ok(output)) if output.exit_code == 0 => {}
                Ok(Ok(output)) => {
                    tracing::warn!(container = %status.name, exit_code = output.exit_code, "PreStopHook failed");
                }
                Ok(Err(error)) => {
                    tracing::warn!(container = %status.name, %error, "PreStopHook failed")
                }
                Err(_) => {
                    tracing::warn!(container = %status.name, ?grace, "PreStopHook failed: it outlasted the grace period")
                }
            }
            if !matches!(outcome, Ok(Ok(ref output)) if output.exit_code == 0) {
                self.event(
                    pod,
                    PodEvent::warning("FailedPreStopHook", "PreStopHook failed".to_owned()),
                );
            }
            let spent = Duration::from_secs(started.elapsed().as_secs());
            grace = grace.saturating_sub(spent).max(MIN_GRACE);
        }
        if let Err(error) = self.runtime.stop_container(status.id.clone(), grace).await {
            tracing::warn!(container = %status.name, %error, "StopContainer failed");
        }
    }

    fn retry_soon(&self, uid: &str) {
        let at = self.now();
        if let Some(entry) = self.core().pods.get_mut(uid) {
            entry.retry_at = Some(at);
        }
    }

    /// The status the pod ends with (its containers as they stopped), then TerminatePod.
    fn report_final(&self, uid: &str, ending: &Ending) {
        let mut core = self.core();
        let runtime_name = core.runtime_name.clone().unwrap_or_default();
        let Some(entry) = core.pods.get_mut(uid) else {
            return;
        };
        entry.finished = true;
        if *ending == Ending::Gone {
            return;
        }
        let status = self.status_of(entry, &runtime_name, Some(ending));
        let pod = Box::new(entry.pod.clone());
        let send_terminated = !std::mem::replace(&mut entry.terminated_sent, true);
        entry.last_sent = Some(status.clone());
        core.outbox.push(PodUpdate::Status {
            pod: pod.clone(),
            status: Box::new(status),
        });
        if send_terminated {
            core.outbox.push(PodUpdate::Terminated { pod });
        }
    }
}
