//! The threads actor instances run on. Instances are placed on the least-loaded arbiter; an
//! arbiter whose thread may be blocked by a hung actor is retired (no new placements, a fresh
//! arbiter takes its place) and stopped once nothing placed on it is alive.
//!
//! A supervisor has a private pool by default. A fleet of nodes in one process hands every
//! supervisor the same [`SharedArbiters`] instead, so ten thousand nodes run on a few threads
//! rather than on ten thousand times six, and are checked for hangs by one timer.

use std::sync::{Arc, Mutex, MutexGuard};

use actix::{Arbiter, dev::ArbiterHandle};

use crate::{hang_check::PoolCheck, liveness::Liveness};

struct Pooled {
    id: u64,
    arbiter: Arbiter,
    live: usize,
    /// Set around every instance poll on this thread: how supervisors see a blocked thread.
    busy: Arc<Liveness>,
}

/// A bounded set of arbiters shared by a supervisor's children (or by several supervisors').
pub(crate) struct ArbiterPool {
    active: Vec<Pooled>,
    retired: Vec<Pooled>,
    next_id: u64,
}

impl ArbiterPool {
    pub(crate) fn new(size: usize) -> Self {
        let mut pool = Self {
            active: Vec::new(),
            retired: Vec::new(),
            next_id: 0,
        };
        for _ in 0..size.max(1) {
            pool.add();
        }
        pool
    }

    fn add(&mut self) {
        self.active.push(Pooled {
            id: self.next_id,
            arbiter: Arbiter::new(),
            live: 0,
            busy: Arc::default(),
        });
        self.next_id += 1;
    }

    /// Picks the arbiter for a new instance and counts the instance on it.
    pub(crate) fn place(&mut self) -> (u64, ArbiterHandle) {
        if self.active.is_empty() {
            self.add();
        }
        let chosen = self
            .active
            .iter_mut()
            .min_by_key(|pooled| pooled.live)
            .expect("the pool always has an active arbiter");
        chosen.live += 1;
        (chosen.id, chosen.arbiter.handle())
    }

    /// The busy mark of arbiter `id`'s thread (a fresh one for an arbiter no longer pooled).
    pub(crate) fn thread_mark(&self, id: u64) -> Arc<Liveness> {
        self.active
            .iter()
            .chain(&self.retired)
            .find(|pooled| pooled.id == id)
            .map(|pooled| Arc::clone(&pooled.busy))
            .unwrap_or_default()
    }

    /// An instance placed on arbiter `id` has ended.
    pub(crate) fn release(&mut self, id: u64) {
        if let Some(pooled) = self.active.iter_mut().find(|pooled| pooled.id == id) {
            pooled.live = pooled.live.saturating_sub(1);
        }
        if let Some(index) = self.retired.iter().position(|pooled| pooled.id == id) {
            let pooled = &mut self.retired[index];
            pooled.live = pooled.live.saturating_sub(1);
            if pooled.live == 0 {
                let pooled = self.retired.swap_remove(index);
                // Stop, never join: the thread may still be blocked and exits when it wakes.
                pooled.arbiter.stop();
                tracing::info!(
                    arbiter = id,
                    "retired arbiter stopped: its last instance ended"
                );
            }
        }
    }

    /// Takes arbiter `id` out of service because an instance on it stopped answering.
    pub(crate) fn retire(&mut self, id: u64) {
        if let Some(index) = self.active.iter().position(|pooled| pooled.id == id) {
            let pooled = self.active.swap_remove(index);
            self.retired.push(pooled);
            self.add();
        }
    }

    /// Stops every arbiter, for shutdown.
    pub(crate) fn stop_all(&mut self) {
        for pooled in self.active.drain(..).chain(self.retired.drain(..)) {
            pooled.arbiter.stop();
        }
    }
}

impl Drop for ArbiterPool {
    /// The last owner is gone (a shared pool's last supervisor and handle): its threads go too.
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// One bounded pool of arbiters that several supervisors place their children on. Cloning
/// shares the pool; its threads stop when the last clone and the last supervisor using it are
/// gone. A hung instance retires its arbiter for every supervisor on the pool: the other
/// instances on that thread are as stuck as it is, and their own supervisors find them hung.
#[derive(Clone)]
pub struct SharedArbiters {
    pool: Arc<Mutex<ArbiterPool>>,
    /// The one hang check of every supervisor placed on the pool.
    check: Arc<PoolCheck>,
}

impl SharedArbiters {
    /// A pool of `threads` arbiters (at least one). Must be called inside a running actix
    /// `System`.
    pub fn new(threads: usize) -> Self {
        Self {
            pool: Arc::new(Mutex::new(ArbiterPool::new(threads))),
            check: Arc::default(),
        }
    }

    /// The hang check shared by every supervisor on this pool.
    pub(crate) fn check(&self) -> &Arc<PoolCheck> {
        &self.check
    }

    /// Arbiters taking placements now (the size asked for; retired ones are not counted).
    pub fn threads(&self) -> usize {
        self.lock().active.len()
    }

    /// Instances alive on the pool, retired arbiters included.
    pub fn live_instances(&self) -> usize {
        let pool = self.lock();
        pool.active
            .iter()
            .chain(&pool.retired)
            .map(|pooled| pooled.live)
            .sum()
    }

    fn lock(&self) -> MutexGuard<'_, ArbiterPool> {
        // The pool's counters are updated in single statements; a panic elsewhere while the
        // lock was held cannot leave them half-written.
        self.pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for SharedArbiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedArbiters")
            .field("threads", &self.threads())
            .finish_non_exhaustive()
    }
}

/// Where one supervisor's children run.
pub(crate) enum Arbiters {
    /// Its own pool, stopped with the supervisor.
    Private(ArbiterPool),
    /// A pool other supervisors use too; this supervisor never stops it.
    Shared(SharedArbiters),
    /// The supervisor's own arbiter (see `SupervisorConfig::same_thread`): nothing to count,
    /// retire or stop.
    Current,
}

impl Arbiters {
    pub(crate) fn place(&mut self) -> (u64, ArbiterHandle) {
        match self {
            Self::Private(pool) => pool.place(),
            Self::Shared(shared) => shared.lock().place(),
            Self::Current => (0, Arbiter::current()),
        }
    }

    /// The busy mark of the thread of arbiter `id`. The supervisor's own arbiter (`Current`)
    /// gets a mark of its own per instance: its check runs on that thread, so it can never see
    /// the thread blocked anyway.
    pub(crate) fn thread_mark(&self, id: u64) -> Arc<Liveness> {
        match self {
            Self::Private(pool) => pool.thread_mark(id),
            Self::Shared(shared) => shared.lock().thread_mark(id),
            Self::Current => Arc::default(),
        }
    }

    pub(crate) fn release(&mut self, id: u64) {
        match self {
            Self::Private(pool) => pool.release(id),
            Self::Shared(shared) => shared.lock().release(id),
            Self::Current => {}
        }
    }

    pub(crate) fn retire(&mut self, id: u64) {
        match self {
            Self::Private(pool) => pool.retire(id),
            Self::Shared(shared) => shared.lock().retire(id),
            Self::Current => {}
        }
    }

    /// Stops the threads this supervisor owns, for its shutdown: all of a private pool, none of
    /// a shared one.
    pub(crate) fn stop_owned(&mut self) {
        if let Self::Private(pool) = self {
            pool.stop_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, thread::ThreadId, time::Duration};

    use tokio::time::Instant;

    use actix::{Actor, Context, Handler, Message};

    use super::*;
    use crate::{
        ChildSpec, ChildState, KillMode, Mailbox, SupervisedActor, Supervisor, SupervisorConfig,
        SupervisorHandle, mailbox,
    };

    #[actix_rt::test]
    async fn supervisors_on_a_shared_pool_place_on_its_bounded_threads() {
        let shared = SharedArbiters::new(2);
        let (mut first, mut second) = (
            Arbiters::Shared(shared.clone()),
            Arbiters::Shared(shared.clone()),
        );
        let placed: Vec<u64> = (0..6)
            .flat_map(|_| [first.place().0, second.place().0])
            .collect();
        let distinct: HashSet<u64> = placed.iter().copied().collect();
        assert_eq!(distinct.len(), 2, "twelve instances on two threads");
        for id in &distinct {
            let on_it = placed.iter().filter(|placed| *placed == id).count();
            assert_eq!(on_it, 6, "least-loaded placement balances the pool");
        }
        assert_eq!(shared.live_instances(), 12);
        first.stop_owned();
        assert_eq!(
            shared.threads(),
            2,
            "a supervisor never stops a shared pool"
        );
    }

    #[actix_rt::test]
    async fn a_retired_shared_arbiter_is_replaced_and_stopped_once_empty() {
        let shared = SharedArbiters::new(1);
        let (mut first, mut second) = (
            Arbiters::Shared(shared.clone()),
            Arbiters::Shared(shared.clone()),
        );
        let (hung, hung_handle) = first.place();
        let (sibling, _) = second.place();
        assert_eq!(hung, sibling, "a one-thread pool holds both");
        first.retire(hung);
        assert_eq!(
            shared.threads(),
            1,
            "a fresh arbiter took the retired one's place"
        );
        let (fresh, _) = second.place();
        assert_ne!(fresh, hung, "nothing new goes to a retired arbiter");
        first.release(hung);
        assert!(
            hung_handle.spawn(async {}),
            "the retired arbiter runs while the other supervisor's instance lives on it"
        );
        second.release(sibling);
        assert_eq!(shared.live_instances(), 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while hung_handle.spawn(async {}) {
            assert!(
                Instant::now() < deadline,
                "the emptied retired arbiter stops"
            );
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Answers with the thread it runs on.
    struct WhereAmI;

    impl Actor for WhereAmI {
        type Context = Context<Self>;
    }

    impl SupervisedActor for WhereAmI {}

    #[derive(Message)]
    #[rtype(result = "ThreadId")]
    struct Which;

    impl Handler<Which> for WhereAmI {
        type Result = actix::MessageResult<Which>;

        fn handle(&mut self, _: Which, _: &mut Context<Self>) -> Self::Result {
            actix::MessageResult(std::thread::current().id())
        }
    }

    fn node_on(shared: &SharedArbiters, node: &str) -> (SupervisorHandle, Vec<Mailbox<WhereAmI>>) {
        let mut config = SupervisorConfig::new(node);
        config.shared_arbiters = Some(shared.clone());
        config.liveness_interval = Duration::from_millis(20);
        config.liveness_timeout = Duration::from_millis(300);
        config.backoff.initial = Duration::from_millis(10);
        let mut builder = Supervisor::builder(config);
        let mut addresses = Vec::new();
        for child in 0..3 {
            let (address, inbox) = mailbox::<WhereAmI>(8);
            builder = builder.child(ChildSpec::new(format!("child-{child}"), inbox, || WhereAmI));
            addresses.push(address);
        }
        (builder.start(), addresses)
    }

    async fn threads_of(addresses: &[Mailbox<WhereAmI>]) -> HashSet<ThreadId> {
        let mut threads = HashSet::new();
        for address in addresses {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                // A request to an instance that is being replaced fails; the next one answers.
                if let Ok(thread) = address.request(Which).await {
                    threads.insert(thread);
                    break;
                }
                assert!(Instant::now() < deadline, "the child answers again");
                actix_rt::time::sleep(Duration::from_millis(5)).await;
            }
        }
        threads
    }

    #[actix_rt::test]
    async fn a_hang_on_a_shared_pool_restarts_the_child_and_keeps_the_pool_bounded() {
        let shared = SharedArbiters::new(2);
        let (first, first_addresses) = node_on(&shared, "node-a");
        let (second, second_addresses) = node_on(&shared, "node-b");
        let mut before = threads_of(&first_addresses).await;
        before.extend(threads_of(&second_addresses).await);
        assert_eq!(
            before.len(),
            2,
            "six children of two nodes run on two threads"
        );
        assert!(!before.contains(&std::thread::current().id()));

        first
            .kill("child-0", KillMode::Hang)
            .await
            .expect("the hang is injected");
        let deadline = Instant::now() + Duration::from_secs(30);
        while first
            .actor("child-0")
            .map(|actor| (actor.state, actor.restarts))
            != Some((ChildState::Running, 1))
        {
            assert!(Instant::now() < deadline, "the hung child is restarted");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        let mut after = threads_of(&first_addresses).await;
        after.extend(threads_of(&second_addresses).await);
        assert_eq!(
            shared.threads(),
            2,
            "the retired arbiter was replaced, not added to"
        );
        assert!(
            after.len() <= 3,
            "at most the two active threads and the retired one: {after:?}"
        );
        assert!(
            first.shutdown(Duration::from_secs(10)).await,
            "node-a stops"
        );
        // node-b's children still answer (threads_of fails the test otherwise) on the pool's
        // threads, which node-a's shutdown left running.
        assert!(threads_of(&second_addresses).await.len() <= 3);
        assert_eq!(shared.threads(), 2);
        assert!(second.shutdown(Duration::from_secs(10)).await);
    }
}
