//! Restart intensity: how many restarts a child may have within a window before the
//! supervisor gives up and escalates, as an OTP supervisor's `intensity`/`period` do.
//!
//! Backed by governor's GCRA: a burst of `max_restarts`, refilled at `max_restarts` per
//! `window`. A burst of `max_restarts` restarts is allowed; the next one inside the window
//! escalates. The limiter reads tokio's clock, so restart windows pass on paused time too.

use std::{num::NonZeroU32, time::Duration};

use governor::{
    Quota, RateLimiter,
    clock::Clock,
    middleware::NoOpMiddleware,
    nanos::Nanos,
    state::{InMemoryState, NotKeyed},
};

/// Bound on restarts per window for one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntensityPolicy {
    pub max_restarts: NonZeroU32,
    pub window: Duration,
}

impl Default for IntensityPolicy {
    fn default() -> Self {
        Self {
            max_restarts: NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN),
            window: Duration::from_secs(60),
        }
    }
}

/// governor's view of tokio's clock: time since the clock was made, so a limiter in an actor
/// sees `tokio::time::pause` and `advance` like every other timer of that actor.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

/// Counts one child's restarts against its [`IntensityPolicy`].
pub struct RestartIntensity<C: Clock = TokioClock> {
    limiter: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<C::Instant>>,
}

impl RestartIntensity<TokioClock> {
    pub fn new(policy: IntensityPolicy) -> Self {
        Self::with_clock(policy, TokioClock::default())
    }
}

impl<C: Clock> RestartIntensity<C> {
    pub fn with_clock(policy: IntensityPolicy, clock: C) -> Self {
        let per_restart = policy.window / policy.max_restarts.get();
        let quota = Quota::with_period(per_restart.max(Duration::from_nanos(1)))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(policy.max_restarts);
        Self {
            limiter: RateLimiter::direct_with_clock(quota, clock),
        }
    }

    /// Records a restart; `false` means the bound is exceeded and the child must not restart.
    pub fn admit_restart(&self) -> bool {
        self.limiter.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn three_per_minute(clock: &FakeRelativeClock) -> RestartIntensity<FakeRelativeClock> {
        let policy = IntensityPolicy {
            max_restarts: NonZeroU32::new(3).unwrap_or(NonZeroU32::MIN),
            window: Duration::from_secs(60),
        };
        RestartIntensity::with_clock(policy, clock.clone())
    }

    #[test]
    fn burst_of_max_restarts_is_admitted_and_the_next_escalates() {
        let clock = FakeRelativeClock::default();
        let intensity = three_per_minute(&clock);
        assert!(intensity.admit_restart());
        assert!(intensity.admit_restart());
        assert!(intensity.admit_restart());
        assert!(!intensity.admit_restart());
    }

    #[test]
    fn restarts_spread_over_the_window_never_escalate() {
        let clock = FakeRelativeClock::default();
        let intensity = three_per_minute(&clock);
        for _ in 0..20 {
            assert!(intensity.admit_restart());
            clock.advance(Duration::from_secs(20));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_clock_is_tokios_so_a_paused_window_refills_on_advance() {
        let intensity = RestartIntensity::new(IntensityPolicy {
            max_restarts: NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN),
            window: Duration::from_secs(60),
        });
        assert!(intensity.admit_restart());
        assert!(intensity.admit_restart());
        assert!(!intensity.admit_restart(), "the burst is spent");
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(
            !intensity.admit_restart(),
            "29 s refill less than one restart"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(intensity.admit_restart(), "30 s refill one restart");
        assert!(!intensity.admit_restart());
    }
}
