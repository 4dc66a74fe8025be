//! Garbage collection, as the kubelet's container GC and pod clean-up: once the pod list is
//! complete, whatever the runtime holds for a pod this node no longer has — deleted (or its
//! static manifest removed) while nodepulse ran, or while it was down — is stopped and removed
//! with its log directory; a known pod keeps its newest sandbox and its newest dead container
//! per name. A pass runs when something may have become collectable, then every minute (the
//! kubelet's `ContainerGCPeriod`) while the node has pods or something is left; a node without
//! pods and without garbage is not woken.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use futures::future::join_all;

use super::{
    engine::Engine,
    grace::MIN_GRACE,
    task_panics::EngineTask,
    view::{TERMINATION_GRACE_ANNOTATION, by_pod, labelled_name, pod_uid},
};
use nodepulse_actors::ports::{
    ContainerRuntimeError, ContainerRuntimeResult, ContainerState, ContainerSummary, SandboxState,
    SandboxSummary,
};

/// The kubelet's container GC period (`ContainerGCPeriod`).
pub const GC_PERIOD: Duration = Duration::from_secs(60);
/// `maxPerPodContainer`: dead containers kept per (pod, container name), for `lastState`.
pub const MAX_DEAD_PER_CONTAINER: usize = 1;

/// What one pass removes, decided on one listing of the runtime.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GcPlan {
    /// Pods the API does not have: containers to stop (id, grace), then every sandbox.
    pub orphans: Vec<Orphan>,
    /// Dead containers beyond the newest per (pod, container name).
    pub dead_containers: Vec<String>,
    /// Sandboxes neither ready nor holding containers, beyond each pod's newest.
    pub dead_sandboxes: Vec<String>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Orphan {
    pub uid: String,
    pub running: Vec<(String, Duration)>,
    pub sandboxes: Vec<String>,
    /// Containers whose sandbox is gone already (RemovePodSandbox takes the others along).
    pub loose: Vec<String>,
}

/// The annotation the kubelet gives a pod by where it came from (`api`, `file`, `http`).
const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// Whether a pod's sandboxes come from a manifest directory or URL (a static pod, never in the
/// API under its own UID: its mirror pod has another).
fn is_static(sandboxes: &[&SandboxSummary]) -> bool {
    sandboxes.iter().any(|sandbox| {
        sandbox
            .annotations
            .get(CONFIG_SOURCE_ANNOTATION)
            .is_some_and(|source| source != "api")
    })
}

/// The grace an orphan's container gets: its pod's, from the annotation the kubelet writes.
fn orphan_grace(container: &ContainerSummary) -> Duration {
    container
        .annotations
        .get(TERMINATION_GRACE_ANNOTATION)
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map_or(MIN_GRACE, Duration::from_secs)
        .max(MIN_GRACE)
}

fn container_name(container: &ContainerSummary) -> &str {
    labelled_name(&container.labels, &container.name)
}

/// The kubelet's rules on one listing. `known` says whether a pod UID is one of this node's
/// pods (`None`: skip it, its worker is acting on it); only called once the list is complete.
/// `own_static`: the node reads static pods itself, so a static pod no source has any more
/// (its manifest removed, also while nodepulse was down) is garbage like any other pod; a
/// node without a static source leaves them alone (a kubelet's, on a shared runtime).
pub fn plan(
    sandboxes: &[SandboxSummary],
    containers: &[ContainerSummary],
    own_static: bool,
    known: impl Fn(&str) -> Option<bool>,
) -> GcPlan {
    let by_pod = by_pod(sandboxes, containers);
    let mut plan = GcPlan::default();
    for (uid, (mut pod_sandboxes, mut pod_containers)) in by_pod {
        match known(uid) {
            None => {}
            Some(false) if !own_static && is_static(&pod_sandboxes) => {}
            Some(false) => plan.orphans.push(Orphan {
                uid: uid.to_owned(),
                running: pod_containers
                    .iter()
                    .filter(|c| c.state != ContainerState::Exited)
                    .map(|c| (c.id.clone(), orphan_grace(c)))
                    .collect(),
                sandboxes: pod_sandboxes.iter().map(|s| s.id.clone()).collect(),
                loose: pod_containers
                    .iter()
                    .filter(|c| !pod_sandboxes.iter().any(|s| s.id == c.sandbox_id))
                    .map(|c| c.id.clone())
                    .collect(),
            }),
            Some(true) => {
                pod_containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
                let mut kept: BTreeMap<&str, usize> = BTreeMap::new();
                let mut remaining = Vec::new();
                for container in pod_containers {
                    let dead = container.state == ContainerState::Exited;
                    let seen = kept.entry(container_name(container)).or_default();
                    if dead && *seen >= MAX_DEAD_PER_CONTAINER {
                        plan.dead_containers.push(container.id.clone());
                        continue;
                    }
                    *seen += usize::from(dead);
                    remaining.push(container);
                }
                pod_sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
                let inactive = pod_sandboxes.iter().skip(1).filter(|s| {
                    s.state != SandboxState::Ready
                        && !remaining.iter().any(|c| c.sandbox_id == s.id)
                });
                plan.dead_sandboxes
                    .extend(inactive.map(|sandbox| sandbox.id.clone()));
            }
        }
    }
    plan
}

/// A call that failed for another reason than the object being gone already.
fn failed(result: ContainerRuntimeResult<()>) -> bool {
    !matches!(result, Ok(()) | Err(ContainerRuntimeError::NotFound { .. }))
}

/// The pod UID of a log directory `<namespace>_<name>_<uid>` (names hold no `_`).
fn log_dir_uid(name: &str) -> Option<&str> {
    let mut parts = name.split('_');
    let (_, _, uid, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    Some(uid)
}

impl Engine {
    /// The pod list is complete: from now on a pod UID the engine does not know is gone.
    pub fn pods_listed(self: &Arc<Self>) {
        self.core().listed = true;
        self.want_gc();
        self.start_cgroup_housekeeping();
    }

    /// Asks for a pass: now, or right after the one in progress. Nothing before the list is
    /// complete, so nothing running is killed on a partial view.
    pub fn want_gc(self: &Arc<Self>) {
        let mut core = self.core();
        if core.stopped || !core.listed {
            return;
        }
        if core.gc_running {
            core.gc_again = true;
            drop(core);
            self.gc_wanted.notify_one();
            return;
        }
        core.gc_running = true;
        drop(core);
        self.spawn_supervised(EngineTask::GarbageCollection, Self::gc_loop);
    }

    /// Keeps the periodic pass going once a pod arrives (a sandbox replaced under a running
    /// pod is collected within a period); no extra pass when it already runs.
    pub fn gc_while_pods(self: &Arc<Self>) {
        let running = self.core().gc_running;
        if !running {
            self.want_gc();
        }
    }

    /// Passes every period while the node has pods or something is left to collect.
    async fn gc_loop(self: Arc<Self>) {
        loop {
            let leftover = match self.collect_garbage().await {
                Ok(leftover) => leftover,
                Err(error) => {
                    tracing::warn!(%error, "garbage collection could not list the runtime");
                    true
                }
            };
            {
                let mut core = self.core();
                if core.stopped {
                    core.gc_running = false;
                    return;
                }
                if std::mem::take(&mut core.gc_again) {
                    continue;
                }
                if !leftover && core.pods.is_empty() {
                    core.gc_running = false;
                    return;
                }
            }
            let _ = tokio::time::timeout(GC_PERIOD, self.gc_wanted.notified()).await;
        }
    }

    /// One pass; whether something collectable is left (a call that failed).
    async fn collect_garbage(self: &Arc<Self>) -> ContainerRuntimeResult<bool> {
        let (sandboxes, containers) = self.list_all().await?;
        let plan = {
            let mut core = self.core();
            core.gc_passes += 1;
            let known = |uid: &str| match core.pods.get(uid) {
                None => Some(false),
                Some(entry) if entry.work.is_syncing() || entry.ending.is_some() => None,
                Some(_) => Some(true),
            };
            plan(&sandboxes, &containers, self.settings.static_pods, known)
        };
        let mut leftover = false;
        for orphan in &plan.orphans {
            leftover |= self.remove_orphan(orphan).await;
        }
        for id in &plan.dead_containers {
            leftover |= failed(self.runtime.remove_container(id.clone()).await);
        }
        for id in &plan.dead_sandboxes {
            leftover |= failed(self.runtime.remove_pod_sandbox(id.clone()).await);
        }
        let held: Vec<&str> = sandboxes
            .iter()
            .filter(|s| !plan.orphans.iter().any(|o| o.sandboxes.contains(&s.id)))
            .filter_map(|s| pod_uid(&s.labels))
            .collect();
        leftover |= self.remove_log_dirs(&held);
        let known: Vec<String> = self.core().pods.keys().cloned().collect();
        let mut known: Vec<&str> = known.iter().map(String::as_str).collect();
        known.extend(held.iter().copied());
        self.cleanup_user_namespaces(&known);
        Ok(leftover)
    }

    /// The kubelet's clean-up of a pod it does not know: its containers stopped with their
    /// pod's grace, its sandboxes stopped (the CNI frees the pod IP) and removed.
    async fn remove_orphan(&self, orphan: &Orphan) -> bool {
        if self.core().stopped {
            return false;
        }
        tracing::info!(uid = %orphan.uid, sandboxes = orphan.sandboxes.len(), "removing what the runtime holds for a pod the node no longer has");
        let stops = orphan
            .running
            .iter()
            .map(|(id, grace)| self.runtime.stop_container(id.clone(), *grace));
        let mut leftover = join_all(stops).await.into_iter().any(failed);
        for id in &orphan.sandboxes {
            let stopped = self.runtime.stop_pod_sandbox(id.clone()).await;
            leftover |=
                failed(stopped) || failed(self.runtime.remove_pod_sandbox(id.clone()).await);
        }
        for id in &orphan.loose {
            leftover |= failed(self.runtime.remove_container(id.clone()).await);
        }
        leftover
    }

    /// Removes `<podLogsDir>/<ns>_<name>_<uid>` of each pod neither known nor holding a
    /// sandbox (`held`); whether one could not be removed.
    fn remove_log_dirs(&self, held: &[&str]) -> bool {
        let Ok(entries) = std::fs::read_dir(&self.settings.pod_logs_dir) else {
            return false;
        };
        let mut leftover = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(uid) = name.to_str().and_then(log_dir_uid) else {
                continue;
            };
            if held.contains(&uid) || self.core().pods.contains_key(uid) {
                continue;
            }
            leftover |= remove_dir(&entry.path());
        }
        leftover
    }
}

/// Removes `dir` and what it holds; whether that failed.
fn remove_dir(dir: &Path) -> bool {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => false,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "cannot remove a pod's log directory");
            true
        }
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
