//! One pod's state in the engine, as two small state machines the type system checks: its
//! worker ([`Work`]: idle, syncing, asked for another round) and its end ([`End`]: live,
//! finished, TerminatePod told). Pure: the engine holds them under its lock and acts on what
//! each transition answers.

/// Whether a worker runs for the pod (one sync at a time per pod, as the kubelet's pod workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// No worker runs.
    Idle {
        /// The PLEG has just inspected the pod: the next sync starts from that, not from a
        /// listing of its own (one round of status calls per change, not two).
        fresh: bool,
    },
    /// A worker syncs it.
    Syncing {
        /// Asked for a sync meanwhile: the worker runs another round.
        again: bool,
        fresh: bool,
    },
}

impl Default for Work {
    fn default() -> Self {
        Self::Idle { fresh: false }
    }
}

impl Work {
    /// A sync is asked for; whether a worker must start (none ran).
    pub fn request(&mut self) -> bool {
        match *self {
            Self::Idle { fresh } => {
                *self = Self::Syncing {
                    again: false,
                    fresh,
                };
                true
            }
            Self::Syncing { fresh, .. } => {
                *self = Self::Syncing { again: true, fresh };
                false
            }
        }
    }

    /// The running worker is to sync once more after this round (idle: nothing runs to ask).
    pub fn again(&mut self) {
        if let Self::Syncing { fresh, .. } = *self {
            *self = Self::Syncing { again: true, fresh };
        }
    }

    /// A round ended; whether the worker runs another (asked meanwhile) or goes idle.
    pub fn round_done(&mut self) -> bool {
        match *self {
            Self::Syncing { again: true, fresh } => {
                *self = Self::Syncing {
                    again: false,
                    fresh,
                };
                true
            }
            Self::Syncing {
                again: false,
                fresh,
            }
            | Self::Idle { fresh } => {
                *self = Self::Idle { fresh };
                false
            }
        }
    }

    /// The worker is gone (it ended, or panicked): nothing runs, nothing is asked.
    pub fn stop(&mut self) {
        *self = Self::Idle { fresh: false };
    }

    pub fn is_syncing(self) -> bool {
        matches!(self, Self::Syncing { .. })
    }

    /// The PLEG's inspection is the pod's current view.
    pub fn mark_fresh(&mut self) {
        match self {
            Self::Idle { fresh } | Self::Syncing { fresh, .. } => *fresh = true,
        }
    }

    /// Whether the sync may start from the PLEG's inspection; it is used up.
    pub fn take_fresh(&mut self) -> bool {
        match self {
            Self::Idle { fresh } | Self::Syncing { fresh, .. } => std::mem::take(fresh),
        }
    }
}

/// How far the pod is from its end, and whether StatusManager was told (`TerminatePod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It runs, or is being torn down.
    Live,
    /// Terminal when found (an earlier nodepulse ended it): nothing runs; TerminatePod waits
    /// for its deletion.
    Finished,
    /// Finished, and TerminatePod told.
    Terminated,
    /// Its API object went while it was finished, and the runtime still holds some of it: torn
    /// down once more; `told`: TerminatePod went already.
    Reopened { told: bool },
}

impl End {
    /// A pod first seen: `terminal` its phase, `deleting` with a deletionTimestamp (then a
    /// terminal one is told at once).
    pub fn found(terminal: bool, deleting: bool) -> Self {
        match (terminal, deleting) {
            (true, true) => Self::Terminated,
            (true, false) => Self::Finished,
            (false, _) => Self::Live,
        }
    }

    /// Nothing more runs or is reported.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Finished | Self::Terminated)
    }

    /// It is finished now; whether TerminatePod is to be told (not yet told).
    pub fn finish(&mut self) -> bool {
        let tell = !matches!(self, Self::Terminated | Self::Reopened { told: true });
        *self = Self::Terminated;
        tell
    }

    /// Finished as it stands, TerminatePod not told (the pod ends Gone, unreported).
    pub fn finish_untold(&mut self) {
        *self = match self {
            Self::Live | Self::Finished | Self::Reopened { told: false } => Self::Finished,
            Self::Terminated | Self::Reopened { told: true } => Self::Terminated,
        };
    }

    /// Its deletion was asked for; whether TerminatePod is to be told now (it was finished
    /// and not yet told).
    pub fn deleting(&mut self) -> bool {
        if *self == Self::Finished {
            *self = Self::Terminated;
            return true;
        }
        false
    }

    /// Its API object is gone while the runtime may still hold some of it: a finished pod is
    /// torn down once more.
    pub fn reopen(&mut self) {
        *self = match *self {
            Self::Finished => Self::Reopened { told: false },
            Self::Terminated => Self::Reopened { told: true },
            other => other,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{End, Work};

    #[test]
    fn a_request_starts_a_worker_once_and_a_second_one_asks_for_another_round() {
        let mut work = Work::default();
        assert!(work.request(), "idle: a worker starts");
        assert!(!work.request(), "syncing: no second worker");
        assert!(work.round_done(), "asked meanwhile: one more round");
        assert!(work.is_syncing());
        assert!(!work.round_done(), "nobody asked: idle");
        assert_eq!(work, Work::Idle { fresh: false });
        assert!(work.request(), "a later request starts a worker again");
    }

    #[test]
    fn again_asks_the_running_worker_for_a_round_and_does_nothing_while_idle() {
        let mut work = Work::default();
        work.again();
        assert_eq!(work, Work::Idle { fresh: false });
        work.request();
        work.again();
        assert!(work.round_done());
    }

    #[test]
    fn the_plegs_inspection_is_used_by_one_sync_whether_it_came_before_or_during_it() {
        let mut work = Work::default();
        work.mark_fresh();
        work.request();
        assert!(work.take_fresh());
        assert!(!work.take_fresh(), "used up");
        work.mark_fresh();
        assert!(!work.round_done());
        assert_eq!(work, Work::Idle { fresh: true }, "kept for the next worker");
        let mut work = Work::Syncing {
            again: true,
            fresh: true,
        };
        assert!(work.round_done());
        assert!(work.take_fresh(), "kept for the next round");
    }

    #[test]
    fn a_stopped_worker_leaves_the_pod_idle_with_nothing_asked() {
        let mut work = Work::Syncing {
            again: true,
            fresh: true,
        };
        work.stop();
        assert_eq!(work, Work::Idle { fresh: false });
        assert!(work.request(), "a new worker may start");
    }

    #[test]
    fn a_pod_found_terminal_is_finished_and_told_only_once_deleted() {
        assert_eq!(End::found(false, true), End::Live);
        assert_eq!(End::found(true, true), End::Terminated);
        let mut end = End::found(true, false);
        assert!(end.is_finished());
        assert!(end.deleting(), "told at its deletion");
        assert!(!end.deleting(), "and only once");
        assert_eq!(end, End::Terminated);
    }

    #[test]
    fn finishing_tells_terminate_pod_once() {
        let mut end = End::Live;
        assert!(!end.deleting(), "a live pod is told when it finishes");
        assert!(end.finish());
        assert!(!end.finish());
        assert!(end.is_finished());
    }

    #[test]
    fn a_finished_pod_whose_object_went_is_torn_down_again_and_told_only_if_it_never_was() {
        let mut end = End::Terminated;
        end.reopen();
        assert_eq!(end, End::Reopened { told: true });
        assert!(!end.is_finished(), "its worker runs again");
        assert!(!end.finish(), "told already");
        let mut end = End::Finished;
        end.reopen();
        assert!(end.finish(), "never told");
        let mut end = End::Live;
        end.reopen();
        assert_eq!(end, End::Live, "a live pod is torn down anyway");
    }

    #[test]
    fn finishing_untold_keeps_whether_it_was_told() {
        let mut end = End::Live;
        end.finish_untold();
        assert_eq!(end, End::Finished);
        let mut end = End::Reopened { told: true };
        end.finish_untold();
        assert_eq!(end, End::Terminated);
    }
}
