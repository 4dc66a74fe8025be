//! When to PATCH although nothing changed: once `nodeStatusReportFrequency` has passed since the
//! last report, shifted by a one-time random offset in [−F/2, +F/2) drawn after a change or
//! the first report (so thousands of nodes do not report in step), and reset to 0 after a
//! report made only because time passed. The first sync after start always reports. In a
//! fleet the periodic computation itself starts at a random phase ([`tick_phase`]).

use std::time::Duration;

use tokio::time::Instant;

/// Where in the first `nodeStatusUpdateFrequency` period the periodic computation starts,
/// for nodes started together; `unit_sample` ∈ [0, 1). The kubelet's 0.04 jitter alone would
/// take some 25 periods to spread them over one period.
pub fn tick_phase(frequency: Duration, unit_sample: f64) -> Duration {
    frequency.mul_f64(unit_sample.clamp(0.0, 1.0))
}

#[derive(Debug, Clone, Default)]
pub struct ReportClock {
    last_report: Option<Instant>,
    /// Seconds added to the frequency; may be negative.
    offset_seconds: f64,
}

impl ReportClock {
    /// Whether to PATCH now.
    pub fn due(&self, changed: bool, now: Instant, frequency: Duration) -> bool {
        let Some(last) = self.last_report else {
            return true;
        };
        if changed {
            return true;
        }
        let wait = (frequency.as_secs_f64() + self.offset_seconds).max(0.0);
        now.saturating_duration_since(last).as_secs_f64() >= wait
    }

    /// Records a successful report; `unit_sample` ∈ [0, 1) draws the next offset.
    pub fn reported(&mut self, changed: bool, now: Instant, frequency: Duration, unit_sample: f64) {
        let first = self.last_report.is_none();
        self.offset_seconds = if changed || first {
            frequency.as_secs_f64() * (unit_sample.clamp(0.0, 1.0) - 0.5)
        } else {
            0.0
        };
        self.last_report = Some(now);
    }

    pub fn last_report(&self) -> Option<Instant> {
        self.last_report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_MINUTES: Duration = Duration::from_secs(300);

    #[test]
    fn the_first_sync_always_reports_and_changes_always_report() {
        let clock = ReportClock::default();
        let now = Instant::now();
        assert!(clock.due(false, now, FIVE_MINUTES));
        let mut clock = clock;
        clock.reported(false, now, FIVE_MINUTES, 0.5);
        assert!(clock.due(true, now + Duration::from_secs(1), FIVE_MINUTES));
        assert!(!clock.due(false, now + Duration::from_secs(1), FIVE_MINUTES));
    }

    #[test]
    fn the_tick_phase_is_a_point_of_the_first_period() {
        let frequency = Duration::from_secs(10);
        assert_eq!(tick_phase(frequency, 0.0), Duration::ZERO);
        assert_eq!(tick_phase(frequency, 0.5), Duration::from_secs(5));
        assert!(tick_phase(frequency, 0.999_999) < frequency);
        assert_eq!(tick_phase(frequency, -1.0), Duration::ZERO, "clamped");
    }

    /// Nodes that changed at the same moment (a fleet's first reports) draw their offsets
    /// independently: their next time-triggered reports fall over the whole ±F/2 window.
    #[test]
    fn first_reports_in_step_spread_the_next_reports_over_the_frequency() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        let mut random = StdRng::seed_from_u64(5);
        let start = Instant::now();
        let mut due_minute = [0_usize; 10];
        for _ in 0..1000 {
            let mut clock = ReportClock::default();
            clock.reported(false, start, FIVE_MINUTES, random.random());
            let due_after = (1..=450_u64)
                .find(|second| clock.due(false, start + Duration::from_secs(*second), FIVE_MINUTES))
                .expect("due within 7.5 minutes");
            assert!((150..=450).contains(&due_after), "{due_after} s");
            #[allow(clippy::cast_possible_truncation)]
            let bucket = ((due_after - 150) / 30).min(9) as usize;
            due_minute[bucket] += 1;
        }
        assert!(
            due_minute.iter().all(|count| (50..150).contains(count)),
            "about 100 reports in every 30 s of the window: {due_minute:?}"
        );
    }

    #[test]
    fn the_offset_after_a_change_moves_the_next_report_then_resets() {
        let start = Instant::now();
        let mut clock = ReportClock::default();
        clock.reported(true, start, FIVE_MINUTES, 0.0); // offset −150 s
        assert!(!clock.due(false, start + Duration::from_secs(149), FIVE_MINUTES));
        assert!(clock.due(false, start + Duration::from_secs(150), FIVE_MINUTES));
        let second = start + Duration::from_secs(150);
        clock.reported(false, second, FIVE_MINUTES, 0.0); // time-triggered: offset back to 0
        assert!(!clock.due(false, second + Duration::from_secs(299), FIVE_MINUTES));
        assert!(clock.due(false, second + Duration::from_secs(300), FIVE_MINUTES));
    }
}
