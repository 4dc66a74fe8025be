//! The kubelet's `killContainersWithSyncResult` and `killContainer`: a pod's live containers
//! stopped in parallel, each after its `preStop` hook (exec or httpGet, within the grace
//! period), sidecars last — each waits, within what is left of its grace, for the app
//! containers and the sidecars declared after it to stop — so a sidecar outlives the app.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::{sync::watch, time::Instant};

use super::{
    engine::Engine,
    grace::MIN_GRACE,
    hooks::FAILED_PRE_STOP_HOOK,
    plan::{app_containers, init_containers, is_sidecar},
    view::{PodRuntime, container_name},
};
use nodepulse_actors::ports::{ContainerState, ContainerStatus, PodEvent};

/// The spec of container `name`, init (sidecars included) or app.
pub fn spec<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    app_containers(pod)
        .iter()
        .chain(init_containers(pod))
        .find(|c| c.name == name)
}

/// The position of `name` among the pod's sidecars' spec order, if it is one.
fn sidecar_position(pod: &Pod, name: &str) -> Option<usize> {
    init_containers(pod)
        .iter()
        .position(|c| c.name == name && is_sidecar(c))
}

/// The ids a container waits for before it is stopped: none for an app container; for a
/// sidecar, every other live container except the sidecars declared before it.
pub fn stops_after(pod: &Pod, live: &[&ContainerStatus], status: &ContainerStatus) -> Vec<String> {
    let Some(position) = sidecar_position(pod, container_name(status)) else {
        return Vec::new();
    };
    live.iter()
        .filter(|other| other.id != status.id)
        .filter(|other| sidecar_position(pod, container_name(other)).is_none_or(|p| p > position))
        .map(|other| other.id.clone())
        .collect()
}

/// `grace` less the whole seconds since `since` (the kubelet counts seconds).
fn less_whole_seconds(grace: Duration, since: Instant) -> Duration {
    grace.saturating_sub(Duration::from_secs(since.elapsed().as_secs()))
}

impl Engine {
    /// Stops every running or created container of `runtime`, sidecars last; `message` is the
    /// Killing event's (default "Stopping container <name>").
    pub(super) async fn kill_containers(
        &self,
        pod: &Arc<Pod>,
        runtime: &PodRuntime,
        grace: Duration,
        message: Option<&str>,
    ) {
        let live: Vec<&ContainerStatus> = runtime
            .containers
            .iter()
            .filter(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
            .collect();
        let (stopped, watcher) = watch::channel(BTreeSet::<String>::new());
        let kills = live.iter().map(|status| {
            let waits_for = stops_after(pod, &live, status);
            let (stopped, watcher) = (&stopped, watcher.clone());
            async move {
                self.kill_container(pod, status, grace, message, (waits_for, watcher))
                    .await;
                stopped.send_modify(|ids| {
                    ids.insert(status.id.clone());
                });
            }
        });
        join_all(kills).await;
    }

    /// One container: the Killing event, its `preStop` hook when it runs, waited for at most
    /// `grace`, whose whole seconds come off it; then its turn (the ids it waits for stopped);
    /// then StopContainer with what is left, never under two seconds.
    pub(super) async fn kill_container(
        &self,
        pod: &Arc<Pod>,
        status: &ContainerStatus,
        grace: Duration,
        message: Option<&str>,
        (waits_for, mut stopped): (Vec<String>, watch::Receiver<BTreeSet<String>>),
    ) {
        let mut grace = grace;
        let name = container_name(status);
        let message = message.map_or_else(|| format!("Stopping container {name}"), str::to_owned);
        self.event(pod, PodEvent::normal("Killing", message));
        self.wake();
        let container = spec(pod, name);
        let hook = container
            .and_then(|c| c.lifecycle.as_ref()?.pre_stop.as_ref())
            .filter(|_| status.state == ContainerState::Running && !grace.is_zero());
        if let (Some(container), Some(handler)) = (container, hook) {
            let started = Instant::now();
            let run = self.run_hook(pod, container, &status.id, handler, grace);
            match tokio::time::timeout(grace, run).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(container = %status.name, %error, "PreStopHook failed");
                    self.event(
                        pod,
                        PodEvent::warning(FAILED_PRE_STOP_HOOK, "PreStopHook failed".to_owned()),
                    );
                }
                Err(_) => {
                    tracing::info!(container = %status.name, ?grace, "PreStop hook not completed in grace period");
                }
            }
            grace = less_whole_seconds(grace, started);
        }
        if !waits_for.is_empty() && !grace.is_zero() {
            let started = Instant::now();
            let turn = stopped.wait_for(|ids| waits_for.iter().all(|id| ids.contains(id)));
            let _ = tokio::time::timeout(grace, turn).await;
            grace = less_whole_seconds(grace, started);
        }
        let grace = grace.max(MIN_GRACE);
        if let Err(error) = self.runtime.stop_container(status.id.clone(), grace).await {
            tracing::warn!(container = %status.name, %error, "StopContainer failed");
        }
    }
}
