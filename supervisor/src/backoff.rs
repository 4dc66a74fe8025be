//! Restart backoff: exponential growth with jitter, reset after a stable run.
//!
//! Pure logic: time comes in as arguments, randomness as a unit sample, so the policy is
//! table-tested without clocks. The supervisor owns one `RestartBackoff` per child.

use std::time::Duration;

/// How restart delays grow. Mirrors `supervision.backoff` in the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    /// Delay before the first restart after a stable period.
    pub initial: Duration,
    /// Upper bound of the delay before jitter.
    pub max: Duration,
    /// Factor applied to the delay after each consecutive restart (≥ 1).
    pub multiplier: f64,
    /// Extra random delay as a fraction of the delay, in `[0, 1]`: the wait is
    /// `delay × (1 + U[0, jitter))`, only ever longer, as `wait.Jitter` does upstream.
    pub jitter: f64,
    /// A child that ran this long before failing is considered stable: its delay starts over.
    pub reset_after: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(30),
            multiplier: 2.0,
            jitter: 0.2,
            reset_after: Duration::from_secs(60),
        }
    }
}

/// The backoff state of one child: how many restarts happened back to back.
#[derive(Debug, Clone, Default)]
pub struct RestartBackoff {
    consecutive: u32,
}

impl RestartBackoff {
    /// The delay before the next restart of a child that ran for `ran_for` before failing.
    /// `unit_sample` is a random number in `[0, 1)` that scales the jitter.
    pub fn next_delay(
        &mut self,
        policy: &BackoffPolicy,
        ran_for: Duration,
        unit_sample: f64,
    ) -> Duration {
        if ran_for >= policy.reset_after {
            self.consecutive = 0;
        }
        let exponent = i32::try_from(self.consecutive).unwrap_or(i32::MAX);
        let grown = policy.initial.as_secs_f64() * policy.multiplier.powi(exponent);
        let capped = grown.min(policy.max.as_secs_f64());
        self.consecutive = self.consecutive.saturating_add(1);
        let jittered = capped * (1.0 + policy.jitter * unit_sample.clamp(0.0, 1.0));
        Duration::from_secs_f64(jittered)
    }

    /// Restarts since the last stable run.
    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BackoffPolicy {
        BackoffPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            multiplier: 2.0,
            jitter: 0.5,
            reset_after: Duration::from_secs(10),
        }
    }

    #[test]
    fn delays_double_until_capped_without_jitter() {
        let mut backoff = RestartBackoff::default();
        let delays: Vec<u128> = (0..6)
            .map(|_| {
                backoff
                    .next_delay(&policy(), Duration::ZERO, 0.0)
                    .as_millis()
            })
            .collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn jitter_only_lengthens_the_delay() {
        let mut backoff = RestartBackoff::default();
        let longest = backoff.next_delay(&policy(), Duration::ZERO, 0.999_999);
        assert!(longest > Duration::from_millis(149) && longest <= Duration::from_millis(150));
    }

    #[test]
    fn stable_run_resets_the_delay() {
        let mut backoff = RestartBackoff::default();
        for _ in 0..4 {
            backoff.next_delay(&policy(), Duration::from_secs(1), 0.0);
        }
        let after_stable = backoff.next_delay(&policy(), Duration::from_secs(10), 0.0);
        assert_eq!(after_stable, Duration::from_millis(100));
        assert_eq!(backoff.consecutive(), 1);
    }
}
