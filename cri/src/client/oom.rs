//! The `oom_score_adj` a container may be given. Without CAP_SYS_RESOURCE no process may set a
//! value below its own, and runc inherits that limit from containerd: asking for the kubelet's
//! -997 (Guaranteed pods) would fail CreateContainer. The client raises what it asks for to its
//! own value and says so once in the log; on a node with the capability its own value is low.

use std::{
    io,
    sync::{
        OnceLock,
        atomic::{AtomicBool, Ordering},
    },
};

/// The kernel's range for `oom_score_adj`.
const OOM_SCORE_ADJ_MIN: i64 = -1000;
const OOM_SCORE_ADJ_MAX: i64 = 1000;

/// This process's own `oom_score_adj`.
pub fn own_oom_score_adj() -> io::Result<i64> {
    let text = std::fs::read_to_string("/proc/self/oom_score_adj")?;
    text.trim()
        .parse()
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
}

/// `asked`, raised to `floor` (the lowest value this process may set) and kept in the kernel's
/// range.
pub fn clamp_oom_score_adj(asked: i64, floor: i64) -> i64 {
    asked.max(floor).clamp(OOM_SCORE_ADJ_MIN, OOM_SCORE_ADJ_MAX)
}

/// The floor, read on first use, and whether the clamp was logged yet.
#[derive(Debug, Default)]
pub(super) struct OomFloor {
    floor: OnceLock<i64>,
    told: AtomicBool,
}

impl OomFloor {
    #[cfg(test)]
    fn at(floor: i64) -> Self {
        Self {
            floor: OnceLock::from(floor),
            told: AtomicBool::new(false),
        }
    }

    /// What to ask the runtime for instead of `asked`; the first change is logged.
    pub(super) fn apply(&self, asked: i64) -> i64 {
        let floor = *self.floor.get_or_init(|| {
            own_oom_score_adj().unwrap_or_else(|error| {
                // Unreadable /proc: ask for what was asked and let the runtime judge.
                tracing::warn!(%error, "cannot read /proc/self/oom_score_adj; not clamping");
                OOM_SCORE_ADJ_MIN
            })
        });
        let clamped = clamp_oom_score_adj(asked, floor);
        if clamped != asked && !self.told.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                asked,
                clamped,
                "containers get oom_score_adj {clamped} instead of {asked}: this process may \
                 not set a value below its own ({floor})"
            );
        }
        clamped
    }

    #[cfg(test)]
    fn told(&self) -> bool {
        self.told.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_raises_what_is_asked_to_the_floor_and_keeps_the_kernel_range() {
        for (asked, floor, expected) in [
            (-997, 0, 0),        // Guaranteed pod, unprivileged process at 0
            (-997, -500, -500),  // a process allowed a little lower
            (-997, -1000, -997), // CAP_SYS_RESOURCE-like floor: no change
            (1000, 0, 1000),     // BestEffort: above the floor, unchanged
            (500, 0, 500),       // Burstable
            (-999, 999, 999),
            (2000, -1000, 1000), // out of range either way
            (-2000, -1000, -1000),
        ] {
            assert_eq!(
                clamp_oom_score_adj(asked, floor),
                expected,
                "asked {asked} with floor {floor}"
            );
        }
    }

    #[test]
    fn the_floor_is_applied_and_logged_once() {
        let floor = OomFloor::at(0);
        assert_eq!(floor.apply(1000), 1000);
        assert!(!floor.told(), "an unchanged value is not worth a log line");
        assert_eq!(floor.apply(-997), 0);
        assert!(floor.told());
        assert_eq!(floor.apply(-998), 0);
    }

    #[test]
    fn own_value_is_read_from_proc_and_in_range() {
        let own = own_oom_score_adj().expect("/proc/self/oom_score_adj");
        assert!((OOM_SCORE_ADJ_MIN..=OOM_SCORE_ADJ_MAX).contains(&own));
        // Whatever it is, asking for the minimum gives exactly it.
        assert_eq!(clamp_oom_score_adj(OOM_SCORE_ADJ_MIN, own), own);
    }
}
