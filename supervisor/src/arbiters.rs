//! The threads actor instances run on. Instances are placed on the least-loaded arbiter; an
//! arbiter whose thread may be blocked by a hung actor is retired (no new placements, a fresh
//! arbiter takes its place) and stopped once nothing placed on it is alive.

use actix::{Arbiter, dev::ArbiterHandle};

struct Pooled {
    id: u64,
    arbiter: Arbiter,
    live: usize,
}

/// A bounded set of arbiters shared by a supervisor's children.
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
