//! The kubelet's back-off (`flowcontrol.Backoff`) for crashing containers (image pulls have
//! `pods::pull_backoff`'s): 10 s doubling to 5 min, no jitter, an entry forgotten (reset) when the next event
//! comes more than twice the maximum after the last restart. Pure: every time is an argument.

use std::{collections::HashMap, time::Duration};

use jiff::{SignedDuration, Timestamp};

/// The first delay, for crash loops and image pulls alike.
pub const INITIAL: Duration = Duration::from_secs(10);
/// `crashLoopBackOff.maxContainerRestartPeriod` and the image pull maximum.
pub const MAX: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    delay: Duration,
    /// When the entry was last advanced: the restart, not the exit it followed. A container
    /// capped at [`MAX`] exits a few seconds after one restart and is restarted [`MAX`] later,
    /// so counted from the exit before, the entry would pass twice the maximum while waiting
    /// and be collected, and the next delay would start over at [`INITIAL`].
    last_update: Timestamp,
}

#[derive(Debug, Clone, Default)]
pub struct Backoff {
    entries: HashMap<String, Entry>,
}

fn since(later: Timestamp, earlier: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or(Duration::ZERO)
}

/// `by` after `now` (`now` itself if that is past the last timestamp): when a pod is due again.
pub(super) fn later(now: Timestamp, by: Duration) -> Timestamp {
    SignedDuration::try_from(by)
        .ok()
        .and_then(|by| now.checked_add(by).ok())
        .unwrap_or(now)
}

/// Whether an event at `event` comes so long after `last_update` that the entry is stale.
fn expired(event: Timestamp, last_update: Timestamp) -> bool {
    since(event, last_update) > MAX * 2
}

impl Backoff {
    /// The current delay when `key` is still backing off from `event` at `now`.
    pub fn in_backoff_since(
        &self,
        key: &str,
        event: Timestamp,
        now: Timestamp,
    ) -> Option<Duration> {
        let entry = self.entries.get(key)?;
        if expired(event, entry.last_update) {
            return None;
        }
        (since(now, event) < entry.delay).then_some(entry.delay)
    }

    /// When the back-off of `key`, counted from `event`, ends.
    pub fn expires_at(&self, key: &str, event: Timestamp) -> Option<Timestamp> {
        let entry = self.entries.get(key)?;
        let delay = SignedDuration::try_from(entry.delay).ok()?;
        event.checked_add(delay).ok()
    }

    /// Records an event at `now`: the first (or one after a long quiet) starts at [`INITIAL`],
    /// each further one doubles the delay up to [`MAX`] (`flowcontrol.Backoff.Next`).
    pub fn next(&mut self, key: &str, event: Timestamp, now: Timestamp) {
        let delay = match self.entries.get(key) {
            Some(entry) if !expired(event, entry.last_update) => (entry.delay * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// Forgets entries idle for longer than twice the maximum.
    pub fn gc(&mut self, now: Timestamp) {
        self.entries
            .retain(|_, entry| !expired(now, entry.last_update));
    }

    pub fn forget(&mut self, key_prefix: &str) {
        self.entries.retain(|key, _| !key.starts_with(key_prefix));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    #[test]
    fn delays_double_from_ten_seconds_to_five_minutes() {
        let mut backoff = Backoff::default();
        let mut delays = Vec::new();
        for i in 0..7 {
            backoff.next("c", at(i * 10), at(i * 10));
            delays.push(backoff.entries["c"].delay.as_secs());
        }
        assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300]);
    }

    #[test]
    fn an_event_more_than_ten_minutes_after_the_last_resets_the_delay() {
        let mut backoff = Backoff::default();
        backoff.next("c", at(0), at(0));
        backoff.next("c", at(10), at(10));
        assert_eq!(backoff.entries["c"].delay, Duration::from_secs(20));
        backoff.next("c", at(10 + 601), at(10 + 601));
        assert_eq!(backoff.entries["c"].delay, INITIAL);
    }

    #[test]
    fn a_key_is_in_backoff_until_its_delay_has_passed_since_the_event() {
        let mut backoff = Backoff::default();
        assert_eq!(backoff.in_backoff_since("c", at(0), at(0)), None);
        backoff.next("c", at(0), at(0));
        assert_eq!(backoff.in_backoff_since("c", at(0), at(9)), Some(INITIAL));
        assert_eq!(backoff.in_backoff_since("c", at(0), at(10)), None);
        assert_eq!(backoff.expires_at("c", at(0)), Some(at(10)));
    }
    /// The upstream spec "should cap back-off at MaxContainerBackOff": a container that exits 5 s
    /// after each start, restarted when its delay has passed, with the garbage collection the
    /// PLEG runs every second. Once capped, every delay stays at five minutes.
    #[test]
    fn a_crash_loop_capped_at_five_minutes_stays_there_through_garbage_collection() {
        let mut backoff = Backoff::default();
        let mut delays = Vec::new();
        let (mut now, mut finished) = (0, 0);
        for _ in 0..10 {
            loop {
                backoff.gc(at(now));
                match backoff.in_backoff_since("c", at(finished), at(now)) {
                    Some(_) => now += 1,
                    None => break,
                }
            }
            delays.push(now - finished);
            backoff.next("c", at(finished), at(now));
            finished = now + 5;
            now = finished;
        }
        assert_eq!(delays, [0, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
    }
}
