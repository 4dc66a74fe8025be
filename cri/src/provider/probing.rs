//! The CRI provider's side of the prober: at every sync it tells the prober each pod's running
//! containers (or that the pod ends), and it acts on what the prober published — the pod's
//! status re-reported (`started`/`ready` read the prober's results), a liveness or startup
//! kill with the kubelet's `Killing` text, and `Unhealthy`/`ProbeWarning` events.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use jiff::Timestamp;
use tokio::sync::watch;

use super::{
    engine::{Engine, PodEntry},
    plan::{app_containers, init_containers, is_sidecar},
    view::pod_label,
};
use nodepulse_actors::{
    ports::{ContainerState, PodEvent},
    prober::{ProbePods, ProberOutput, RestartContainer, RunningContainer, reported_by_api},
};

impl Engine {
    /// Tells the prober the pod's running app containers and sidecars; a pod being torn down, or one with
    /// nothing running, has its workers stopped. A full mailbox loses only this message: the
    /// next sync says it again.
    pub(super) fn tell_prober(&self, entry: &PodEntry, runtime_name: &str) {
        let Some(prober) = &self.prober else { return };
        let uid = entry.pod.metadata.uid.clone().unwrap_or_default();
        let message = if entry.end.is_finished() || entry.ending.is_some() {
            ProbePods::Gone { pod_uid: uid }
        } else {
            ProbePods::Sync {
                pod: Arc::clone(&entry.pod),
                running: self.running_containers(entry, runtime_name),
            }
        };
        if let Err(error) = prober.try_send(message) {
            tracing::debug!(%error, pod = %pod_label(&entry.pod), "cannot tell the prober of a pod sync");
        }
    }

    fn running_containers(&self, entry: &PodEntry, runtime_name: &str) -> Vec<RunningContainer> {
        let (wall, now) = (self.now(), tokio::time::Instant::now());
        let sidecars = init_containers(&entry.pod).iter().filter(|c| is_sidecar(c));
        app_containers(&entry.pod)
            .iter()
            .chain(sidecars)
            .filter_map(|container| {
                let newest = entry.runtime.newest(&container.name)?;
                if newest.state != ContainerState::Running {
                    return None;
                }
                let container_id = format!("{runtime_name}://{}", newest.id);
                let started = Timestamp::from_nanosecond(i128::from(newest.started_at)).ok()?;
                let running_for =
                    Duration::try_from(wall.duration_since(started)).unwrap_or(Duration::ZERO);
                Some(RunningContainer {
                    name: container.name.clone(),
                    reported: reported_by_api(&entry.pod, &container.name, &container_id),
                    started_at: now.checked_sub(running_for).unwrap_or(now),
                    container_id,
                })
            })
            .collect()
    }

    /// Acts on one prober output for a pod this provider runs.
    pub fn prober_output(self: &Arc<Self>, output: &ProberOutput) {
        match output {
            ProberOutput::Readiness(readiness) => self.republish(&readiness.pod_uid),
            ProberOutput::Started { pod_uid, .. } => {
                self.republish(pod_uid);
                // A started sidecar lets the containers after it go.
                self.request_sync(pod_uid);
            }
            ProberOutput::Event { pod_uid, event } => {
                let pod = self.core().pods.get(pod_uid).map(|e| e.pod.clone());
                if let Some(pod) = pod {
                    let event = PodEvent::warning(event.reason, event.message.clone());
                    self.event(&pod, event);
                }
            }
            ProberOutput::Restart(restart) => {
                self.spawn_probe_kill(restart.clone());
            }
        }
    }

    /// The pod's status again, now that `started` or `ready` of a container changed.
    fn republish(&self, uid: &str) {
        let mut core = self.core();
        self.publish(&mut core, uid);
    }

    /// Kills the container the probe failed (if it still runs) as any kill: the kubelet's
    /// `Killing` event with the probe's text, the `preStop` hook, then StopContainer, all
    /// within the probe's grace period; the pod's next sync applies the restart policy and
    /// the crash-loop back-off, as after any exit.
    pub(super) async fn kill_for_probe(self: Arc<Self>, restart: RestartContainer) {
        let runtime_id = (restart.container_id.split_once("://"))
            .map_or(restart.container_id.as_str(), |(_, id)| id)
            .to_owned();
        let (pod, status) = {
            let core = self.core();
            let Some(entry) = core.pods.get(&restart.pod_uid) else {
                return;
            };
            let Some(status) = (entry.runtime.newest(&restart.container_name))
                .filter(|c| c.id == runtime_id && c.state == ContainerState::Running)
                .cloned()
            else {
                return;
            };
            if entry.ending.is_some() || entry.end.is_finished() {
                return;
            }
            (entry.pod.clone(), status)
        };
        let grace = Duration::from_secs(u64::try_from(restart.grace_period_seconds).unwrap_or(0));
        let (_, nobody_first) = watch::channel(BTreeSet::new());
        self.kill_container(
            &pod,
            &status,
            grace,
            Some(&restart.killing_message),
            (Vec::new(), nobody_first),
        )
        .await;
        self.request_sync(&restart.pod_uid);
    }
}
