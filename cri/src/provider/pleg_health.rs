//! The PLEG's health as the kubelet's `GenericPLEG.Healthy`: unhealthy once no relist has
//! listed the runtime for longer than the relist threshold (3 min; 10 min while the runtime's
//! container events are followed), with the kubelet's message. A PLEG with no pods sleeps
//! (the kubelet's relists an empty node): it counts as active, its clock starting as it wakes.

use std::{
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;

use nodepulse_actors::{go_duration::go_duration_exact, ports::HealthCheck};

/// The kubelet's `genericPlegRelistThreshold`.
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);
/// The kubelet's `eventedPlegRelistThreshold`: the generic relist's while events arrive.
pub const EVENTED_RELIST_THRESHOLD: Duration = Duration::from_secs(600);

#[derive(Debug)]
pub struct PlegHealth {
    threshold: Duration,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// When the last relist that listed the runtime started (or the PLEG woke); `None`
    /// while it sleeps without pods.
    last_active: Option<Instant>,
    evented: bool,
}

/// Why a PLEG last active at `last_active` is unhealthy at `now`, as the kubelet says it.
pub fn unhealthy_since(last_active: Instant, now: Instant, threshold: Duration) -> Option<String> {
    let elapsed = now.saturating_duration_since(last_active);
    (elapsed > threshold).then(|| {
        format!(
            "pleg was last seen active {} ago; threshold is {}",
            go_duration_exact(elapsed),
            go_duration_exact(threshold)
        )
    })
}

impl PlegHealth {
    /// Unhealthy after `threshold` without a relist (the relist's while events arrive: 10 min).
    pub fn new(threshold: Duration) -> Self {
        Self {
            threshold,
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// No pods: nothing to relist, nothing to measure.
    pub(super) fn sleeping(&self) {
        self.seen().last_active = None;
    }

    /// The PLEG runs (again): measured from now unless it already was.
    pub(super) fn awake(&self, now: Instant) {
        self.seen().last_active.get_or_insert(now);
    }

    /// A relist that started at `started` listed the runtime.
    pub(super) fn relisted(&self, started: Instant) {
        self.seen().last_active = Some(started);
    }

    /// Whether the runtime's container events are followed (the longer threshold applies).
    pub(super) fn set_evented(&self, evented: bool) {
        self.seen().evented = evented;
    }

    fn threshold(&self, evented: bool) -> Duration {
        if evented {
            EVENTED_RELIST_THRESHOLD
        } else {
            self.threshold
        }
    }
}

impl HealthCheck for PlegHealth {
    fn name(&self) -> &str {
        "PLEG"
    }

    fn unhealthy(&self, now: Instant) -> Option<String> {
        let seen = self.seen();
        let last_active = seen.last_active?;
        unhealthy_since(last_active, now, self.threshold(seen.evented))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{PlegHealth, RELIST_THRESHOLD, unhealthy_since};
    use nodepulse_actors::ports::HealthCheck;

    #[test]
    fn unhealthy_only_past_the_threshold_with_the_kubelets_message() {
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        assert_eq!(unhealthy_since(start, at(180_000), RELIST_THRESHOLD), None);
        assert_eq!(
            unhealthy_since(start, at(180_500), RELIST_THRESHOLD).as_deref(),
            Some("pleg was last seen active 3m0.5s ago; threshold is 3m0s")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleeping_pleg_is_healthy_and_an_awake_one_is_measured_from_its_waking() {
        let health = PlegHealth::new(RELIST_THRESHOLD);
        let later = || Instant::now() + Duration::from_secs(3600);
        assert_eq!(health.unhealthy(later()), None, "never woke");
        health.awake(Instant::now());
        tokio::time::advance(Duration::from_secs(100)).await;
        health.awake(Instant::now());
        tokio::time::advance(Duration::from_secs(81)).await;
        assert_eq!(
            health.unhealthy(Instant::now()).as_deref(),
            Some("pleg was last seen active 3m1s ago; threshold is 3m0s"),
            "measured from the first waking"
        );
        health.relisted(Instant::now());
        assert_eq!(health.unhealthy(Instant::now()), None);
        health.sleeping();
        assert_eq!(health.unhealthy(later()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn while_events_are_followed_the_threshold_is_ten_minutes() {
        let health = PlegHealth::new(RELIST_THRESHOLD);
        health.relisted(Instant::now());
        health.set_evented(true);
        let at = Instant::now() + Duration::from_secs(300);
        assert_eq!(health.unhealthy(at), None);
        let at = Instant::now() + Duration::from_secs(601);
        assert_eq!(
            health.unhealthy(at).as_deref(),
            Some("pleg was last seen active 10m1s ago; threshold is 10m0s")
        );
    }
}
