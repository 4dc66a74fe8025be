//! How the supervisor tells a hung instance from an idle one without sending it anything: each
//! instance marks, in one atomic, when its task starts and ends a poll (every handler, timer and
//! control request runs inside one), and so does the thread it runs on; the supervisor's
//! periodic check looks for a poll that has not ended for `livenessTimeout`. An idle instance is
//! never polled, so it costs nothing.

use std::{
    cell::RefCell,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context as TaskContext, Poll},
    time::Duration,
};

use tokio::time::Instant;

thread_local! {
    /// The instance whose task this thread is running, for the panic hook.
    static RUNNING: RefCell<Option<BusyMarks>> = const { RefCell::new(None) };
}

/// One instance's busy mark: `polls << 1 | busy`. Only the instance's own thread writes it
/// (and the panic hook on that thread); the supervisor only reads.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    mark: AtomicU64,
    /// Set by the panic hook: the instance is unwinding, and the exit guard reports it. A panic
    /// hook symbolising a backtrace can take seconds; that is not a hang.
    panicking: AtomicBool,
}

impl Liveness {
    /// A poll (or the factory) starts: busy, in a new spell.
    pub(crate) fn begin(&self) {
        let polls = self.mark.load(Ordering::Relaxed) >> 1;
        self.mark.store(((polls + 1) << 1) | 1, Ordering::Release);
        // A panic that was caught inside the instance did not end it; a new poll means it runs.
        self.panicking.store(false, Ordering::Relaxed);
    }

    /// The poll returned: idle.
    pub(crate) fn end(&self) {
        self.mark.fetch_and(!1, Ordering::Release);
    }

    /// Times the instance's task was woken and polled (its factory counts as one).
    pub(crate) fn polls(&self) -> u64 {
        self.mark.load(Ordering::Acquire) >> 1
    }

    pub(crate) fn is_panicking(&self) -> bool {
        self.panicking.load(Ordering::Acquire)
    }

    /// What the panic hook does, for tests that stand in for a hook still running.
    #[cfg(test)]
    pub(crate) fn mark_panicking(&self) {
        self.panicking.store(true, Ordering::Release);
    }
}

/// The marks one instance's polls set: its own, and its thread's. A thread blocked by one
/// instance blocks every other instance placed on it; the thread's mark lets their supervisors
/// see that too, though those instances themselves look idle.
#[derive(Debug, Clone, Default)]
pub(crate) struct BusyMarks {
    pub instance: Arc<Liveness>,
    pub thread: Arc<Liveness>,
}

impl BusyMarks {
    /// Runs `work` as one busy spell of the instance and its thread, visible to the panic hook.
    pub(crate) fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        let _restore = RestoreRunning(RUNNING.with(|running| running.replace(Some(self.clone()))));
        self.instance.begin();
        self.thread.begin();
        let output = work();
        // Not reached when `work` unwinds: the marks stay busy, and `panicking` says why.
        self.thread.end();
        self.instance.end();
        output
    }
}

/// Puts back the thread's previous running instance, also when the work unwinds (the panic
/// hook has run by then).
struct RestoreRunning(Option<BusyMarks>);

impl Drop for RestoreRunning {
    fn drop(&mut self) {
        let previous = self.0.take();
        let _ = RUNNING.try_with(|running| {
            if let Ok(mut running) = running.try_borrow_mut() {
                *running = previous;
            }
        });
    }
}

/// Called from the panic hook: the instance running on this thread (if any) is panicking.
pub(crate) fn mark_running_panicking() {
    // `try_with`: a panic while the thread's locals are being torn down must not panic again.
    let _ = RUNNING.try_with(|running| {
        if let Ok(running) = running.try_borrow()
            && let Some(marks) = running.as_ref()
        {
            marks.instance.panicking.store(true, Ordering::Release);
            marks.thread.panicking.store(true, Ordering::Release);
        }
    });
}

/// An instance's task, polled inside its busy mark.
pub(crate) struct Watched<F> {
    pub inner: Pin<Box<F>>,
    pub marks: BusyMarks,
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        this.marks.run(|| inner.as_mut().poll(task))
    }
}

/// How far a check's tick may fire off its schedule (the timer wheel's millisecond rounding
/// and scheduling delay). Without it, five ticks a period apart can measure 4.999 periods and a
/// hang waits one more period than the bound promises.
const TICK_SLACK: Duration = Duration::from_millis(10);

/// What the supervisor's check remembers of one instance: the busy spell it last saw, and when
/// it first saw it.
#[derive(Debug, Default)]
pub(crate) struct BusyWatch {
    seen: Option<(u64, Instant)>,
}

impl BusyWatch {
    /// One check at `now`: how long the instance has been seen busy in one spell, once that is
    /// at least `timeout`. A spell is only ever timed from a check that saw it, so a hang is
    /// never declared early (but for [`TICK_SLACK`]), and is declared by the first check
    /// `timeout` after that one: within `timeout` plus one check period of the spell's start.
    pub(crate) fn check(
        &mut self,
        liveness: &Liveness,
        now: Instant,
        timeout: Duration,
    ) -> Option<Duration> {
        let mark = liveness.mark.load(Ordering::Acquire);
        if mark & 1 == 0 || liveness.is_panicking() {
            self.seen = None;
            return None;
        }
        match self.seen {
            Some((spell, since)) if spell == mark => {
                let busy_for = now.saturating_duration_since(since);
                (busy_for + TICK_SLACK >= timeout).then_some(busy_for)
            }
            _ => {
                self.seen = Some((mark, now));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn one_spell_busy_past_the_timeout_is_reported_from_its_first_sighting() {
        let (liveness, mut watch, start) =
            (Liveness::default(), BusyWatch::default(), Instant::now());
        liveness.begin();
        assert_eq!(watch.check(&liveness, start, TIMEOUT), None);
        let almost = start + TIMEOUT - TICK_SLACK - Duration::from_millis(1);
        assert_eq!(watch.check(&liveness, almost, TIMEOUT), None);
        // A tick a millisecond early is still the tick `timeout` after the first sighting.
        let jittered = TIMEOUT - Duration::from_millis(1);
        assert_eq!(
            watch.check(&liveness, start + jittered, TIMEOUT),
            Some(jittered)
        );
    }

    #[test]
    fn short_spells_in_a_row_are_never_one_long_one() {
        let (liveness, mut watch, start) =
            (Liveness::default(), BusyWatch::default(), Instant::now());
        for second in 0..20 {
            liveness.begin();
            let now = start + Duration::from_secs(second);
            assert_eq!(watch.check(&liveness, now, TIMEOUT), None, "at {second} s");
            liveness.end();
        }
        assert_eq!(liveness.polls(), 20);
    }

    #[test]
    fn an_idle_or_panicking_instance_is_never_reported() {
        let (liveness, mut watch, start) =
            (Liveness::default(), BusyWatch::default(), Instant::now());
        assert_eq!(watch.check(&liveness, start, TIMEOUT), None);
        assert_eq!(watch.check(&liveness, start + TIMEOUT * 10, TIMEOUT), None);
        let marks = BusyMarks {
            instance: Arc::new(liveness),
            thread: Arc::default(),
        };
        let liveness = &marks.instance;
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            marks.run(|| {
                mark_running_panicking(); // what the hook does, without printing a panic
                panic!("unwinding");
            })
        }));
        assert!(unwound.is_err());
        assert!(liveness.is_panicking(), "still busy, but panicking");
        assert!(marks.thread.is_panicking(), "and so is its thread");
        for tenth in 0..100 {
            let now = start + TIMEOUT * tenth / 10;
            assert_eq!(watch.check(liveness, now, TIMEOUT), None);
        }
        liveness.begin();
        assert!(!liveness.is_panicking(), "a new poll: the panic was caught");
    }
}
