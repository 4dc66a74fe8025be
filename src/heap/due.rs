//! When the free heap is worth handing back. A burst (a hundred pods bound at once, a fleet's
//! pods created or deleted together) leaves most of what it allocated free but resident until
//! the next trim; with only the minute's trim, a node measured in the minute after a burst shows
//! the burst's peak, not what it keeps (a fleet of 200 nodes with 2,000 simulated pods: 158 MiB
//! of anonymous memory until the trim, 96 MiB after it). So every [`CHECK_PERIOD`] two readings
//! are taken, and a trim is due as soon as either shows a burst:
//! - resident anonymous memory grew by [`growth`] over the level the last trim left (a burst
//!   that came and went between two checks, or live memory, which a trim leaves where it is
//!   and then takes as the new level: growth that stays costs one trim, not one a check);
//! - the heap in use fell by [`growth`] below the highest it was since the last trim (a burst
//!   that ended after the check that saw it grow, such as deletes that free what they found:
//!   freeing lowers nothing resident, so the first reading cannot see it).
//!
//! And once more after a trim either rule made due, at the first check where the heap in use
//! no longer falls: a burst's trim comes while its tail is still being freed, and the last
//! small blocks freed can be what kept whole free pages resident (a fleet of 200 nodes whose
//! 2,000 pods were deleted: 5.2 MiB more given back by a trim 15 s after the deletes, nothing
//! live of the pods left, and otherwise resident until the minute's trim).

use std::time::{Duration, Instant};

/// How often the readings are taken (`/proc/self/status` and glibc's `mallinfo2`, a few
/// microseconds for a node's heap).
pub const CHECK_PERIOD: Duration = Duration::from_secs(5);

/// The least change that makes a trim due (a trim walks every arena under its lock, so not for
/// a few pages).
pub const GROWTH_FLOOR: u64 = 2 << 20;

/// The change, in bytes, from `level` that makes a trim due: an eighth of it, at least
/// [`GROWTH_FLOOR`].
pub fn growth(level: u64) -> u64 {
    (level / 8).max(GROWTH_FLOOR)
}

/// What is read at each check; `None` where a figure cannot be read (the period alone then
/// decides).
#[derive(Debug, Clone, Copy, Default)]
pub struct Reading {
    /// Resident anonymous bytes ([`resident_anon`]).
    pub resident_anon: Option<u64>,
    /// Bytes the allocator has handed out and not had back (`super::heap_in_use`).
    pub heap_in_use: Option<u64>,
}

/// Decides, at each check, whether to trim: [`super::TRIM_PERIOD`] after the last trim, or on
/// a burst (the module's two rules).
#[derive(Debug)]
pub struct Due {
    /// Resident anonymous bytes after the last trim, or the lowest read since (memory given
    /// back by the allocator on its own lowers the bar for the next burst).
    level: Option<u64>,
    /// The most heap in use read since the last trim.
    high: Option<u64>,
    /// After a burst's trim, the heap in use at the last check, while it still falls.
    tail: Option<u64>,
    last_trim: Instant,
}

/// Why a trim is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// [`super::TRIM_PERIOD`] since the last trim.
    Period,
    /// Resident memory grew by [`growth`] over the level the last trim left.
    Growth,
    /// The heap in use fell by [`growth`] below its high since the last trim.
    Freed,
    /// The heap in use stopped falling after a trim for a burst ([`Self::Growth`] or
    /// [`Self::Freed`]): what the burst's tail freed.
    Settled,
}

impl Due {
    /// A decision whose period counts from `now`, with no level yet (the first reading is).
    pub fn new(now: Instant) -> Self {
        Self {
            level: None,
            high: None,
            tail: None,
            last_trim: now,
        }
    }

    /// Whether a trim is due at `now`, given what was `read`.
    pub fn check(&mut self, now: Instant, read: Reading) -> Option<Reason> {
        if now.duration_since(self.last_trim) >= super::TRIM_PERIOD {
            return Some(Reason::Period);
        }
        if let Some(anon) = read.resident_anon {
            match self.level {
                Some(level) if anon >= level + growth(level) => return Some(Reason::Growth),
                Some(level) if anon >= level => {}
                _ => self.level = Some(anon),
            }
        }
        if let Some(in_use) = read.heap_in_use {
            let high = self.high.map_or(in_use, |high| high.max(in_use));
            self.high = Some(high);
            if in_use + growth(high) <= high {
                return Some(Reason::Freed);
            }
            if let Some(previous) = self.tail {
                if in_use >= previous {
                    return Some(Reason::Settled);
                }
                self.tail = Some(in_use);
            }
        }
        None
    }

    /// A trim made due for `reason` was done at `now`, after which this was `read`.
    pub fn trimmed(&mut self, now: Instant, read: Reading, reason: Reason) {
        self.last_trim = now;
        self.level = read.resident_anon;
        self.high = read.heap_in_use;
        self.tail = match reason {
            Reason::Growth | Reason::Freed => read.heap_in_use,
            Reason::Period | Reason::Settled => None,
        };
    }
}

/// Resident anonymous memory of this process in bytes (`RssAnon` of `/proc/self/status`), `None`
/// where it cannot be read.
pub fn resident_anon() -> Option<u64> {
    crate::proc_stats::status_field("RssAnon:").map(|kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn anon(bytes: u64) -> Reading {
        Reading {
            resident_anon: Some(bytes),
            heap_in_use: None,
        }
    }

    fn in_use(bytes: u64) -> Reading {
        Reading {
            resident_anon: None,
            heap_in_use: Some(bytes),
        }
    }

    #[test]
    fn the_period_makes_a_trim_due_without_a_reading() {
        let start = Instant::now();
        let mut due = Due::new(start);
        let none = Reading::default();
        assert_eq!(due.check(start + Duration::from_secs(59), none), None);
        assert_eq!(
            due.check(start + super::super::TRIM_PERIOD, none),
            Some(Reason::Period)
        );
    }

    #[test]
    fn growth_over_the_level_left_by_the_last_trim_makes_a_trim_due() {
        let start = Instant::now();
        let mut due = Due::new(start);
        let at = |seconds| start + Duration::from_secs(seconds);
        // The first reading sets the level.
        assert_eq!(due.check(at(5), anon(20 * MIB)), None);
        // Less than an eighth above it is not worth a trim.
        assert_eq!(due.check(at(10), anon(22 * MIB)), None);
        assert_eq!(due.check(at(15), anon(23 * MIB)), Some(Reason::Growth));
        // The trim left live memory where it was: the new level, and no trim again for it.
        due.trimmed(at(15), anon(22 * MIB), Reason::Growth);
        assert_eq!(due.check(at(20), anon(22 * MIB)), None);
        assert_eq!(due.check(at(25), anon(24 * MIB)), None);
        assert_eq!(due.check(at(30), anon(25 * MIB)), Some(Reason::Growth));
        // The period counts from the last trim.
        due.trimmed(at(30), anon(25 * MIB), Reason::Growth);
        assert_eq!(due.check(at(89), anon(25 * MIB)), None);
        assert_eq!(due.check(at(90), anon(25 * MIB)), Some(Reason::Period));
    }

    #[test]
    fn memory_given_back_lowers_the_level() {
        let start = Instant::now();
        let mut due = Due::new(start);
        let at = |seconds| start + Duration::from_secs(seconds);
        assert_eq!(due.check(at(5), anon(40 * MIB)), None);
        assert_eq!(due.check(at(10), anon(10 * MIB)), None);
        // An eighth of 10 MiB is under the floor: 2 MiB over the new level.
        assert_eq!(due.check(at(15), anon(11 * MIB)), None);
        assert_eq!(due.check(at(20), anon(12 * MIB)), Some(Reason::Growth));
    }

    /// Deletes free what they found: nothing resident falls, the heap in use does.
    #[test]
    fn a_fall_of_the_heap_in_use_below_its_high_makes_a_trim_due() {
        let start = Instant::now();
        let mut due = Due::new(start);
        let at = |seconds| start + Duration::from_secs(seconds);
        assert_eq!(due.check(at(5), in_use(60 * MIB)), None);
        assert_eq!(due.check(at(10), in_use(80 * MIB)), None, "the high");
        assert_eq!(
            due.check(at(15), in_use(71 * MIB)),
            None,
            "less than an eighth"
        );
        assert_eq!(due.check(at(20), in_use(70 * MIB)), Some(Reason::Freed));
        // The trim's reading is the new high: the same heap is no burst again, only settled
        // (one more trim for the burst's tail).
        due.trimmed(at(20), in_use(70 * MIB), Reason::Freed);
        assert_eq!(due.check(at(25), in_use(70 * MIB)), Some(Reason::Settled));
        due.trimmed(at(25), in_use(70 * MIB), Reason::Settled);
        assert_eq!(due.check(at(30), in_use(62 * MIB)), None);
        assert_eq!(due.check(at(35), in_use(61 * MIB)), Some(Reason::Freed));
    }

    #[test]
    fn a_bursts_trim_is_followed_by_one_more_once_the_heap_stops_falling() {
        let start = Instant::now();
        let mut due = Due::new(start);
        let at = |seconds| start + Duration::from_secs(seconds);
        assert_eq!(due.check(at(5), in_use(80 * MIB)), None);
        assert_eq!(due.check(at(10), in_use(60 * MIB)), Some(Reason::Freed));
        due.trimmed(at(10), in_use(60 * MIB), Reason::Freed);
        // The tail still frees (less than a burst): wait for it.
        assert_eq!(due.check(at(15), in_use(57 * MIB)), None);
        assert_eq!(due.check(at(20), in_use(56 * MIB)), None);
        assert_eq!(due.check(at(25), in_use(56 * MIB)), Some(Reason::Settled));
        // Once: the settled heap's trim is followed by none.
        due.trimmed(at(25), in_use(56 * MIB), Reason::Settled);
        assert_eq!(due.check(at(30), in_use(56 * MIB)), None);
        assert_eq!(due.check(at(35), in_use(57 * MIB)), None);
        // Nor is the minute's trim.
        assert_eq!(due.check(at(85), in_use(57 * MIB)), Some(Reason::Period));
        due.trimmed(at(85), in_use(57 * MIB), Reason::Period);
        assert_eq!(due.check(at(90), in_use(57 * MIB)), None);
    }

    #[test]
    fn reads_this_process_resident_anonymous_memory() {
        assert!(resident_anon().is_some_and(|bytes| bytes > 0));
    }
}
