//! The evented PLEG (the kubelet's `EventedPLEG`): where the runtime serves CRI
//! `GetContainerEvents`, a pod is read afresh and synced as soon as an event names it, and the
//! relist slows to the kubelet's 300 s; a runtime without it (Unimplemented) keeps the 1 s
//! relist, said once; after 5 failed streams the relist returns to 1 s for good.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use tokio::time::Instant;

use super::engine::Engine;
use nodepulse_actors::ports::{ContainerEvents, ContainerRuntimeError};

/// The generic relist period while events arrive (`genericPlegRelistPeriod` with the gate).
pub const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);
/// `eventedPlegMaxStreamRetries`: failed streams before falling back to the generic PLEG.
const MAX_STREAM_RETRIES: u32 = 5;

impl Engine {
    /// The relist period now: the kubelet's 300 s while the event stream works.
    pub fn relist_period(&self) -> Duration {
        if self.core().evented {
            EVENTED_RELIST_PERIOD
        } else {
            self.settings.relist_period
        }
    }

    /// Subscribes to the runtime's container events and follows them, resubscribing after a
    /// failure (with a relist at once, as the kubelet) until the retries run out.
    pub(super) async fn evented_pleg(self: Arc<Self>) {
        let mut failures = 0;
        while failures < MAX_STREAM_RETRIES {
            let failure = match self.runtime.container_events().await {
                Err(ContainerRuntimeError::Unimplemented { .. }) => {
                    tracing::info!(
                        period = ?self.settings.relist_period,
                        "the runtime has no container event stream (CRI GetContainerEvents); the PLEG relists"
                    );
                    return;
                }
                Err(error) => error.to_string(),
                Ok(events) => {
                    self.pleg_health.set_evented(true);
                    if !std::mem::replace(&mut self.core().evented, true) {
                        tracing::info!(period = ?EVENTED_RELIST_PERIOD, "the PLEG follows the runtime's container events and relists less often");
                    }
                    self.follow(events).await
                }
            };
            if self.core().stopped {
                return;
            }
            failures += 1;
            tracing::warn!(%failure, attempt = failures, "the runtime's container event stream failed");
            self.relist_now.notify_one();
        }
        self.core().evented = false;
        self.pleg_health.set_evented(false);
        self.relist_now.notify_one();
        tracing::warn!(
            period = ?self.settings.relist_period,
            "the container event stream failed {MAX_STREAM_RETRIES} times; back to relisting"
        );
    }

    /// Reads and syncs the pod each event names, until the stream fails or ends; why it did.
    async fn follow(self: &Arc<Self>, mut events: ContainerEvents) -> String {
        while let Some(event) = events.next().await {
            if self.core().stopped {
                return "nodepulse is stopping".to_owned();
            }
            match event {
                Ok(event) => {
                    if let Some(uid) = event.pod_uid {
                        self.pod_event(&uid).await;
                    }
                }
                Err(error) => return error.to_string(),
            }
        }
        "the runtime ended the stream".to_owned()
    }

    /// An event for one of `uid`'s containers: its state read now, and a sync from it.
    async fn pod_event(self: &Arc<Self>, uid: &str) {
        let seen = match self.core().pods.get(uid) {
            Some(entry) if !entry.end.is_finished() => entry.generation,
            _ => return,
        };
        let current = match self.refresh_if_unchanged(uid, seen).await {
            Ok(current) => current,
            Err(error) => {
                tracing::debug!(%error, uid, "cannot read the pod an event named; the relist will");
                self.relist_now.notify_one();
                return;
            }
        };
        if current && let Some(entry) = self.core().pods.get_mut(uid) {
            entry.work.mark_fresh();
        }
        self.request_sync(uid);
    }

    /// Waits out the relist period: woken early when the event stream asks for a relist, and
    /// syncing meanwhile the pods whose back-off runs out (the relist does it otherwise).
    pub(super) async fn wait_for_relist(self: &Arc<Self>) {
        let deadline = Instant::now() + self.relist_period();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.core().stopped {
                return;
            }
            let due = self.next_retry_in().filter(|due| *due < left);
            tokio::select! {
                () = self.relist_now.notified() => return,
                () = self.retries_changed.notified() => {}
                () = tokio::time::sleep(due.unwrap_or(left)) => {
                    if due.is_some() {
                        self.sync_due();
                    }
                }
            }
        }
    }

    /// How long until the first idle pod's back-off runs out.
    fn next_retry_in(&self) -> Option<Duration> {
        let now = self.now();
        let core = self.core();
        core.pods
            .values()
            .filter(|entry| !entry.work.is_syncing() && !entry.end.is_finished())
            .filter_map(|entry| entry.retry_at)
            .min()
            .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO))
    }
}

#[cfg(test)]
#[path = "evented_tests.rs"]
mod tests;
