//! Who looks at the busy marks, and how often: each supervisor keeps its running instances in a
//! [`HangWatch`]; a supervisor on a private pool checks its own on a timer, while every
//! supervisor on a [`SharedArbiters`](crate::SharedArbiters) pool is checked by the pool's one
//! timer, which tells a supervisor only of an instance found hung. A fleet of 10,000 nodes
//! then has one check a period instead of 10,000 timers waking the supervisors' thread; the
//! check looks at a tenth of them every tenth of the period, so the thread (which also runs
//! the API clients' I/O in a fleet) never stalls for a look at all 70,000 instances at once.

use std::{
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    time::Duration,
};

use actix::{Message, Recipient};
use tokio::time::{Instant, MissedTickBehavior};

use crate::liveness::{BusyMarks, BusyWatch};

/// An instance found busy in one poll (or idle on a blocked thread) past the timeout.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub(crate) struct HungInstance {
    pub child: usize,
    pub generation: u64,
    pub reason: String,
}

/// One running instance under watch.
struct Watched {
    child: usize,
    generation: u64,
    marks: BusyMarks,
    busy: BusyWatch,
    thread_busy: BusyWatch,
}

/// One supervisor's running instances and the timeout they are held to.
pub(crate) struct HangWatch {
    timeout: Duration,
    instances: Mutex<Vec<Watched>>,
}

impl HangWatch {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            instances: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Watched>> {
        // Every change is a single push, retain or field update: a panic elsewhere while the
        // lock was held cannot leave the list half-written.
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches `child`'s new instance (in place of any earlier one).
    pub(crate) fn watch(&self, child: usize, generation: u64, marks: BusyMarks) {
        let mut instances = self.lock();
        instances.retain(|watched| watched.child != child);
        instances.push(Watched {
            child,
            generation,
            marks,
            busy: BusyWatch::default(),
            thread_busy: BusyWatch::default(),
        });
    }

    /// `child`'s instance ended or was given up on: nothing more to look at.
    pub(crate) fn unwatch(&self, child: usize) {
        self.lock().retain(|watched| watched.child != child);
    }

    /// One look at every instance's marks at `now`: those hung, each reported once (it is no
    /// longer watched).
    pub(crate) fn check(&self, now: Instant) -> Vec<HungInstance> {
        let timeout = self.timeout;
        let mut hung = Vec::new();
        self.lock().retain_mut(|watched| {
            let marks = &watched.marks;
            let reason = if let Some(busy_for) = watched.busy.check(&marks.instance, now, timeout) {
                format!("hung: busy in one poll for {busy_for:.1?}")
            } else if let Some(busy_for) = watched.thread_busy.check(&marks.thread, now, timeout) {
                // Idle itself, but nothing it is sent can run: as stuck as the culprit.
                format!("hung: its thread blocked by another actor for {busy_for:.1?}")
            } else {
                return true;
            };
            hung.push(HungInstance {
                child: watched.child,
                generation: watched.generation,
                reason,
            });
            false
        });
        hung
    }
}

/// A supervisor as a shared pool's check sees it.
struct Checked {
    watch: Weak<HangWatch>,
    tell: Recipient<HungInstance>,
}

/// How many slices a shared pool's check spreads one period's look over.
const SLICES: usize = 10;

/// The supervisors placed on one shared pool, checked together.
#[derive(Default)]
pub(crate) struct PoolCheck {
    supervisors: Mutex<Rounds>,
    running: Mutex<bool>,
}

/// The supervisors, and how far the current round has looked.
#[derive(Default)]
struct Rounds {
    checked: Vec<Checked>,
    next: usize,
}

impl PoolCheck {
    fn supervisors(&self) -> MutexGuard<'_, Rounds> {
        self.supervisors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a supervisor; the first one starts the pool's check, every `period`, on the
    /// current arbiter. It ends with the pool.
    pub(crate) fn register(
        self: &Arc<Self>,
        watch: &Arc<HangWatch>,
        tell: Recipient<HungInstance>,
        period: Duration,
    ) {
        self.supervisors().checked.push(Checked {
            watch: Arc::downgrade(watch),
            tell,
        });
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if !*running {
            *running = true;
            actix_rt::spawn(check_every(Arc::downgrade(self), period / SLICES as u32));
        }
    }

    /// One slice of a round: the next tenth of the supervisors (by their count when the round
    /// began), so every supervisor is looked at once a period. Those gone are dropped when a
    /// round begins, never in the middle of one, where it would shift others past the cursor.
    fn check_slice(&self, now: Instant) {
        let mut rounds = self.supervisors();
        if rounds.next >= rounds.checked.len() {
            rounds.next = 0;
            rounds
                .checked
                .retain(|checked| checked.watch.strong_count() > 0);
        }
        let slice = rounds.checked.len().div_ceil(SLICES).max(1);
        let (start, end) = (rounds.next, (rounds.next + slice).min(rounds.checked.len()));
        rounds.next = end;
        for checked in &rounds.checked[start..end] {
            let Some(watch) = checked.watch.upgrade() else {
                continue;
            };
            for hung in watch.check(now) {
                checked.tell.do_send(hung);
            }
        }
    }
}

async fn check_every(pool: Weak<PoolCheck>, period: Duration) {
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        pool.check_slice(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn a_hung_instance_is_reported_once_and_an_unwatched_one_never() {
        let watch = HangWatch::new(TIMEOUT);
        let (stuck, gone) = (BusyMarks::default(), BusyMarks::default());
        watch.watch(0, 1, stuck.clone());
        watch.watch(1, 1, gone.clone());
        stuck.instance.begin();
        gone.instance.begin();
        let start = Instant::now();
        assert!(watch.check(start).is_empty(), "first sighting");
        watch.unwatch(1);
        let hung = watch.check(start + TIMEOUT);
        assert_eq!(hung.len(), 1);
        assert_eq!((hung[0].child, hung[0].generation), (0, 1));
        assert!(hung[0].reason.starts_with("hung: busy in one poll"));
        assert!(
            watch.check(start + TIMEOUT * 2).is_empty(),
            "reported once: the supervisor replaces it"
        );
    }

    #[test]
    fn a_new_instance_replaces_the_watch_of_its_predecessor() {
        let watch = HangWatch::new(TIMEOUT);
        let old = BusyMarks::default();
        old.instance.begin();
        watch.watch(0, 1, old);
        let start = Instant::now();
        assert!(watch.check(start).is_empty());
        watch.watch(0, 2, BusyMarks::default());
        assert!(
            watch.check(start + TIMEOUT).is_empty(),
            "the busy predecessor is no longer looked at"
        );
    }

    #[actix_rt::test]
    async fn a_shared_pool_checks_every_supervisor_with_one_timer_and_forgets_the_gone() {
        use actix::{Actor, Context, Handler};

        #[derive(Default)]
        struct Told(Arc<Mutex<Vec<HungInstance>>>);
        impl Actor for Told {
            type Context = Context<Self>;
        }
        impl Handler<HungInstance> for Told {
            type Result = ();
            fn handle(&mut self, hung: HungInstance, _: &mut Context<Self>) {
                self.0.lock().unwrap().push(hung);
            }
        }

        let pool = Arc::new(PoolCheck::default());
        let told = Arc::new(Mutex::new(Vec::new()));
        let tell = Told(Arc::clone(&told)).start().recipient();
        let period = Duration::from_millis(10);
        let (busy, idle) = (
            Arc::new(HangWatch::new(Duration::from_millis(50))),
            Arc::new(HangWatch::new(Duration::from_millis(50))),
        );
        let marks = BusyMarks::default();
        marks.instance.begin();
        busy.watch(3, 7, marks);
        idle.watch(0, 1, BusyMarks::default());
        pool.register(&busy, tell.clone(), period);
        pool.register(&idle, tell, period);
        assert_eq!(pool.supervisors().checked.len(), 2);
        let deadline = Instant::now() + Duration::from_secs(10);
        while told.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the pool's check finds the hang");
            actix_rt::time::sleep(period).await;
        }
        let first = told.lock().unwrap()[0].clone();
        assert_eq!((first.child, first.generation), (3, 7));
        drop(idle);
        actix_rt::time::sleep(period * 5).await;
        assert_eq!(
            pool.supervisors().checked.len(),
            1,
            "a gone supervisor is dropped"
        );
    }
}
