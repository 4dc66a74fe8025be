//! The pods' cgroups, as the kubelet's pod and QoS container managers keep them: a pod's
//! cgroup made (the QoS cgroups updated first) before its sandbox, whose `cgroup_parent` it
//! becomes; a pod whose cgroup cannot be made is not started (`FailedCreatePodContainer`).
//! A housekeeping task, every minute and when a pod ends, updates the QoS cgroups and removes
//! the cgroups of pods that no longer run, stale ones left by an earlier nodepulse included.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;

use super::{engine::Engine, task_panics::EngineTask, view::pod_label};
use nodepulse_actors::{
    pods::cgroups::{Qos, pod_config::resource_config_for_pod, pod_qos, qos::qos_cgroup_configs},
    ports::{CgroupName, PodEvent},
};

/// The kubelet's `UpdateCgroups` period, and that of its orphaned pod cgroup cleanup
/// (housekeeping).
pub const CGROUP_HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(60);

impl Engine {
    /// The pod's cgroup, by its UID and QoS class; `None` without cgroups per QoS (or for a
    /// UID the kubelet's names refuse, which the API never gives).
    pub(super) fn pod_cgroup(&self, pod: &Pod) -> Option<CgroupName> {
        let setup = self.pod_cgroups.as_ref()?;
        let uid = pod.metadata.uid.as_deref()?;
        setup.layout.pod(uid, pod_qos(pod)).ok()
    }

    /// The `cgroup_parent` RunPodSandbox and CreateContainer get: the pod cgroup's literal
    /// path, or empty (the runtime's default) without cgroups per QoS.
    pub(super) fn cgroup_parent(&self, pod: &Pod) -> String {
        match (self.pod_cgroups.as_ref(), self.pod_cgroup(pod)) {
            (Some(setup), Some(name)) => setup.layout.literal(&name),
            _ => String::new(),
        }
    }

    /// Makes the pod's cgroup when it is missing (after the QoS cgroups are updated for it),
    /// as the kubelet's SyncPod does before anything of the pod runs; false, with an Event,
    /// when it cannot be made.
    pub(super) fn ensure_pod_cgroup(&self, pod: &Arc<Pod>) -> bool {
        let Some(setup) = self.pod_cgroups.as_ref() else {
            return true;
        };
        let Some(name) = self.pod_cgroup(pod) else {
            return true;
        };
        if setup.cgroups.exists(&name) {
            return true;
        }
        self.update_qos_cgroups();
        let made = resource_config_for_pod(pod, setup.settings)
            .map_err(|e| e.to_string())
            .and_then(|config| {
                setup
                    .cgroups
                    .ensure(&name, &config)
                    .map_err(|e| e.to_string())
            });
        match made {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(pod = %pod_label(pod), %error, "unable to ensure pod container exists");
                self.event(
                    pod,
                    PodEvent::warning(
                        "FailedCreatePodContainer",
                        format!("unable to ensure pod container exists: {error}"),
                    ),
                );
                self.wake();
                false
            }
        }
    }

    /// The QoS cgroups' shares for the pods that are not finished (`UpdateCgroups`).
    pub(super) fn update_qos_cgroups(&self) {
        let Some(setup) = self.pod_cgroups.as_ref() else {
            return;
        };
        let active: Vec<Arc<Pod>> = self
            .core()
            .pods
            .values()
            .filter(|entry| !entry.end.is_finished())
            .map(|entry| Arc::clone(&entry.pod))
            .collect();
        for (qos, config) in qos_cgroup_configs(active.iter().map(AsRef::as_ref)) {
            let name = setup.layout.qos(qos);
            if let Err(error) = setup.cgroups.ensure(&name, &config) {
                tracing::warn!(%error, cgroup = %setup.layout.literal(&name), "failed to update the QoS cgroup");
            }
        }
    }

    /// Asks the housekeeping for a pass now (a pod ended).
    pub(super) fn want_cgroup_housekeeping(&self) {
        if self.pod_cgroups.is_some() {
            self.cgroups_wanted.notify_one();
        }
    }

    /// Starts the housekeeping once the pod list is complete: before, a pod not seen yet
    /// would look orphaned and its containers be killed.
    pub(super) fn start_cgroup_housekeeping(self: &Arc<Self>) {
        if self.pod_cgroups.is_some() && !std::mem::replace(&mut self.core().cgroups_started, true)
        {
            self.spawn_supervised(EngineTask::PodCgroups, Self::cgroup_housekeeping);
        }
    }

    async fn cgroup_housekeeping(self: Arc<Self>) {
        loop {
            if self.core().stopped {
                return;
            }
            self.update_qos_cgroups();
            self.remove_orphaned_pod_cgroups();
            let _ =
                tokio::time::timeout(CGROUP_HOUSEKEEPING_PERIOD, self.cgroups_wanted.notified())
                    .await;
        }
    }

    /// `cleanupOrphanedPodCgroups`: every pod cgroup in the QoS cgroups whose pod is not one
    /// that may still run (unknown to the engine, or finished) is killed and removed.
    pub(super) fn remove_orphaned_pod_cgroups(&self) {
        let Some(setup) = self.pod_cgroups.as_ref() else {
            return;
        };
        let layout = &setup.layout;
        for qos in [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort] {
            let parent = layout.qos(qos);
            let children = match setup.cgroups.children(&parent) {
                Ok(children) => children,
                Err(error) => {
                    tracing::warn!(%error, "cannot list the pod cgroups");
                    continue;
                }
            };
            for child in children {
                let Some(uid) = layout.pod_uid(&child) else {
                    continue;
                };
                let running =
                    self.core().pods.get(&uid).is_some_and(|entry| {
                        !entry.end.is_finished() || entry.runtime.any_running()
                    });
                if running {
                    continue;
                }
                let Ok(name) = layout.pod(&uid, qos) else {
                    continue;
                };
                tracing::info!(pod_uid = uid, cgroup = %layout.literal(&name), "removing the cgroup of a pod that no longer runs");
                if let Err(error) = setup.cgroups.destroy(&name) {
                    tracing::warn!(%error, pod_uid = uid, "failed to remove the orphaned pod cgroup");
                }
            }
        }
    }
}
