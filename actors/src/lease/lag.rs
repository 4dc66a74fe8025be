//! How late Lease renewals land: for every successful round, the time from when the round was
//! due (the timer's deadline) to when the API server accepted the renewal. One histogram per
//! process, so a fleet of LeaseActors reports one distribution; benchmarks read and reset it.

use std::{
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::Duration,
};

/// Millisecond buckets up to this; later renewals share the last bucket (the maximum is kept
/// exactly).
const BUCKETS: usize = 16_384;

/// A lock-free histogram of renewal lag with 1 ms resolution.
pub struct LagHistogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    max_micros: AtomicU64,
}

/// Percentiles of the lag recorded since the last reset.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LagSummary {
    pub count: u64,
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
}

impl LagHistogram {
    pub const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            count: AtomicU64::new(0),
            max_micros: AtomicU64::new(0),
        }
    }

    pub fn record(&self, lag: Duration) {
        let millis = usize::try_from(lag.as_millis()).unwrap_or(usize::MAX);
        self.buckets[millis.min(BUCKETS - 1)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        let micros = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        self.max_micros.fetch_max(micros, Relaxed);
    }

    /// The percentiles so far; a percentile is the upper edge of its millisecond bucket.
    pub fn summary(&self) -> LagSummary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|bucket| bucket.load(Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let percentile = |fraction: f64| -> f64 {
            if total == 0 {
                return 0.0;
            }
            // The smallest bucket holding at least `fraction` of the samples.
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let rank = ((total as f64) * fraction).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (millis, count) in counts.iter().enumerate() {
                seen += count;
                if seen >= rank {
                    #[allow(clippy::cast_precision_loss)]
                    return (millis + 1) as f64 / 1000.0;
                }
            }
            #[allow(clippy::cast_precision_loss)]
            let last = BUCKETS as f64 / 1000.0;
            last
        };
        let max = Duration::from_micros(self.max_micros.load(Relaxed)).as_secs_f64();
        LagSummary {
            count: total,
            p50_seconds: percentile(0.50).min(max),
            p90_seconds: percentile(0.90).min(max),
            p99_seconds: percentile(0.99).min(max),
            max_seconds: max,
        }
    }

    /// Forgets everything, to measure a steady state after a start-up.
    pub fn reset(&self) {
        for bucket in &self.buckets {
            bucket.store(0, Relaxed);
        }
        self.count.store(0, Relaxed);
        self.max_micros.store(0, Relaxed);
    }
}

impl Default for LagHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Every LeaseActor of the process records here.
pub static RENEWAL_LAG: LagHistogram = LagHistogram::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_lags() {
        let histogram = LagHistogram::new();
        assert_eq!(histogram.summary().count, 0);
        for millis in 1..=100 {
            histogram.record(Duration::from_micros(millis * 1000 - 500));
        }
        let summary = histogram.summary();
        assert_eq!(summary.count, 100);
        assert!((summary.p50_seconds - 0.050).abs() < 1e-9, "{summary:?}");
        assert!((summary.p90_seconds - 0.090).abs() < 1e-9, "{summary:?}");
        assert!((summary.p99_seconds - 0.099).abs() < 1e-9, "{summary:?}");
        assert!((summary.max_seconds - 0.0995).abs() < 1e-9, "{summary:?}");
    }

    #[test]
    fn a_lag_beyond_the_buckets_keeps_its_exact_maximum_and_reset_forgets() {
        let histogram = LagHistogram::new();
        histogram.record(Duration::from_secs(90));
        let summary = histogram.summary();
        assert!((summary.max_seconds - 90.0).abs() < 1e-9);
        assert!(summary.p99_seconds >= 16.0, "{summary:?}");
        histogram.reset();
        assert_eq!(histogram.summary().count, 0);
        assert!(histogram.summary().max_seconds.abs() < f64::EPSILON);
    }
}
