//! The PLEG (the kubelet's generic pod lifecycle event generator): relists every sandbox and
//! container each second (300 s while the runtime's event stream works: `evented`) while the
//! node has pods — and sleeps without a timer while it has none — inspecting the pods whose
//! containers changed and syncing them, and syncing the pods whose back-off ran out.

use std::sync::Arc;

use tokio::time::Instant;

use super::{
    engine::Engine,
    view::{Fingerprint, by_pod},
};
use nodepulse_actors::ports::{
    ContainerFilter, ContainerRuntimeResult, ContainerSummary, SandboxFilter, SandboxSummary,
};

#[cfg(test)]
#[path = "pleg_tests.rs"]
mod tests;

impl Engine {
    /// The PLEG: relists while the node has pods, waits to be told of pods while it has none.
    pub(super) async fn pleg(self: Arc<Self>) {
        // Said once when relisting starts failing and once when it works again.
        let mut failing = false;
        loop {
            // A stop ends the loop even where the runtime it runs on goes on (tests).
            let (active, stopped) = {
                let core = self.core();
                (
                    core.pods.values().any(|entry| !entry.end.is_finished()),
                    core.stopped,
                )
            };
            if stopped {
                return;
            }
            if !active {
                self.pleg_health.sleeping();
                self.pods_present.notified().await;
                continue;
            }
            self.pleg_health.awake(Instant::now());
            self.pleg_fault_point();
            match self.relist().await {
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(%error, "PLEG relist failed; trying again every period");
                }
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("PLEG relists again");
                }
                _ => {}
            }
            self.wake();
            self.wait_for_relist().await;
        }
    }

    /// One relist: pods whose sandboxes or containers changed are inspected and synced; pods
    /// whose back-off ran out are synced.
    async fn relist(self: &Arc<Self>) -> ContainerRuntimeResult<()> {
        if self.runtime_name().await.is_none() {
            return Ok(());
        }
        let _timed = nodepulse_actors::kubelet_metrics::relist_started();
        let started = Instant::now();
        let (sandboxes, containers) = self.list_all().await?;
        self.pleg_health.relisted(started);
        // Grouped once: filtering the whole listing for each pod was 20,000 label lookups a
        // second with 100 pods.
        let by_pod = by_pod(&sandboxes, &containers);
        let mut changed = Vec::new();
        {
            let mut core = self.core();
            core.relists += 1;
            for (uid, entry) in &core.pods {
                if entry.end.is_finished() {
                    continue;
                }
                let (own_sandboxes, own_containers) = by_pod
                    .get(uid.as_str())
                    .map_or((&[][..], &[][..]), |(s, c)| (&s[..], &c[..]));
                let print = Fingerprint::of_listing(own_sandboxes, own_containers);
                if print != entry.runtime.fingerprint() {
                    let ids = own_sandboxes
                        .iter()
                        .map(|s| s.id.clone())
                        .collect::<Vec<_>>();
                    let cids = own_containers
                        .iter()
                        .map(|c| c.id.clone())
                        .collect::<Vec<_>>();
                    changed.push((uid.clone(), ids, cids, entry.generation));
                }
            }
        }
        for (uid, sandbox_ids, container_ids, seen) in changed {
            let current = self
                .inspect(&uid, sandbox_ids, container_ids, Some(seen))
                .await?;
            if current && let Some(entry) = self.core().pods.get_mut(&uid) {
                entry.work.mark_fresh();
            }
            self.request_sync(&uid);
        }
        {
            let now = self.now();
            let mut core = self.core();
            core.crash.gc(now);
            core.pulls.forget_stale(tokio::time::Instant::now());
        }
        self.sync_due();
        Ok(())
    }

    /// Every sandbox and container the runtime holds.
    pub(super) async fn list_all(
        &self,
    ) -> ContainerRuntimeResult<(Vec<SandboxSummary>, Vec<ContainerSummary>)> {
        let sandboxes = self
            .runtime
            .list_pod_sandboxes(SandboxFilter::default())
            .await?;
        let containers = self
            .runtime
            .list_containers(ContainerFilter::default())
            .await?;
        Ok((sandboxes, containers))
    }

    /// Syncs the pods whose back-off ran out.
    pub(super) fn sync_due(self: &Arc<Self>) {
        let now = self.now();
        let due: Vec<String> = self
            .core()
            .pods
            .iter()
            .filter(|(_, e)| !e.work.is_syncing() && e.retry_at.is_some_and(|at| at <= now))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in due {
            self.request_sync(&uid);
        }
    }
}
