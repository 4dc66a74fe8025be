//! The recordings that need a little state of their own: the PLEG's relist (its interval since
//! the last one and its duration, as `GenericPLEG.Relist` observes them), a pod's start (from
//! the first status the node sets for it to its first `Running`, the kubelet's
//! `firstSeenTime` to phase Running) and a volume operation's outcome.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::time::Instant;

use super::KUBELET_METRICS;

/// When the last relist started, process-wide as the kubelet's one PLEG.
static LAST_RELIST: Mutex<Option<Instant>> = Mutex::new(None);

/// When each pod was first given a status, until it runs or is forgotten.
static POD_STARTS: PodStarts = PodStarts::new();

/// One relist, timed until dropped.
#[must_use = "the relist is timed until the guard is dropped"]
pub struct RelistTimer {
    started: Instant,
}

/// A relist starts now: the interval since the previous one is observed, and
/// `kubelet_pleg_last_seen_seconds` set.
pub fn relist_started() -> RelistTimer {
    let started = Instant::now();
    let previous = LAST_RELIST
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(started);
    let metrics = &KUBELET_METRICS;
    if let Some(previous) = previous {
        let interval = started.saturating_duration_since(previous).as_secs_f64();
        metrics.pleg_relist_interval.observe(&[], interval);
    }
    // The kubelet's gauge holds whole Unix seconds.
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    #[allow(clippy::cast_precision_loss)] // Unix seconds fit an f64 exactly
    metrics.pleg_last_seen.set(&[], unix as f64);
    RelistTimer { started }
}

impl Drop for RelistTimer {
    fn drop(&mut self) {
        let took = self.started.elapsed().as_secs_f64();
        KUBELET_METRICS.pleg_relist_duration.observe(&[], took);
    }
}

/// The pods given a status that do not run yet, with when their first status was set.
#[derive(Debug)]
pub struct PodStarts(Mutex<Option<HashMap<String, Instant>>>);

impl PodStarts {
    pub const fn new() -> Self {
        Self(Mutex::new(None))
    }

    /// A status with `phase` is set at `now`: the first starts the pod's clock; the first
    /// `Running` after it ends the clock and gives the time it took; a terminal phase ends it.
    /// (The kubelet's condition also observes at a pod's very first status, with whatever
    /// time passed since its first-seen annotation; nodepulse observes only starts.)
    pub fn phase(&self, uid: &str, phase: Option<&str>, now: Instant) -> Option<Duration> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = seen.get_or_insert_with(HashMap::new);
        match phase {
            Some("Running") => {
                let first = seen.remove(uid)?;
                Some(now.saturating_duration_since(first))
            }
            Some("Succeeded" | "Failed") => {
                seen.remove(uid);
                None
            }
            _ => {
                seen.entry(uid.to_owned()).or_insert(now);
                None
            }
        }
    }

    /// The pod was forgotten before it ran: its clock is dropped.
    pub fn forget(&self, uid: &str) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(seen) = seen.as_mut() {
            seen.remove(uid);
        }
    }
}

impl Default for PodStarts {
    fn default() -> Self {
        Self::new()
    }
}

/// A pod's status is set to `phase`: `kubelet_pod_start_duration_seconds` when it first runs.
pub fn pod_phase(uid: &str, phase: Option<&str>) {
    if let Some(took) = POD_STARTS.phase(uid, phase, Instant::now()) {
        let took = took.as_secs_f64();
        KUBELET_METRICS.pod_start_duration.observe(&[], took);
    }
}

/// The pod was forgotten (gone from the node) before it ran.
pub fn pod_forgotten(uid: &str) {
    POD_STARTS.forget(uid);
}

/// A volume operation (`volume_mount`, `volume_unmount`, …) of `plugin` (the kubelet's plugin
/// name) that started at `started` ended, well or not: `storage_operation_duration_seconds`.
pub fn storage_operation(plugin: &str, operation: &str, started: Instant, ok: bool) {
    let status = if ok { "success" } else { "fail-unknown" };
    let took = started.elapsed().as_secs_f64();
    KUBELET_METRICS
        .storage_operation_duration
        .observe(&[plugin, operation, status, "false"], took);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_start_is_measured_once_from_its_first_status_to_running() {
        let starts = PodStarts::new();
        let at = Instant::now();
        let after = |seconds| at + Duration::from_secs(seconds);
        assert_eq!(starts.phase("a", Some("Pending"), at), None);
        assert_eq!(starts.phase("a", Some("Pending"), after(1)), None);
        assert_eq!(
            starts.phase("a", Some("Running"), after(3)),
            Some(Duration::from_secs(3)),
            "from the first status"
        );
        assert_eq!(starts.phase("a", Some("Running"), after(4)), None, "once");
        // Running from its first status on (the agent restarted): nothing to measure.
        assert_eq!(starts.phase("b", Some("Running"), at), None);
        // Forgotten, or finished, before it ran.
        starts.phase("c", None, at);
        starts.forget("c");
        assert_eq!(starts.phase("c", Some("Running"), after(1)), None);
        starts.phase("d", Some("Pending"), at);
        starts.phase("d", Some("Failed"), after(1));
        assert_eq!(starts.phase("d", Some("Running"), after(2)), None);
    }
}
