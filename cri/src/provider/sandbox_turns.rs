//! Turns to make a pod sandbox: at most so many RunPodSandbox calls (each with the inspection
//! after it) at a time, taken in the order asked, as tokio's semaphore hands out its permits.
//! Who holds a turn and who waits for one is in the provider's debug state, so a pod that stays
//! ContainerCreating through a burst can be told from one the runtime is slow on.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::{Semaphore, SemaphorePermit};

pub(super) struct SandboxTurns {
    turns: Semaphore,
    at_once: usize,
    waiting: AtomicUsize,
}

/// Counts one waiter for as long as it lives, also when its task is dropped while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SandboxTurns {
    /// `at_once` turns (at least one).
    pub(super) fn new(at_once: usize) -> Self {
        let at_once = at_once.max(1);
        Self {
            turns: Semaphore::new(at_once),
            at_once,
            waiting: AtomicUsize::new(0),
        }
    }

    /// Waits for a turn, which lasts as long as the permit; `None` only once the turns are
    /// closed (they never are while the engine lives).
    pub(super) async fn take(&self) -> Option<SemaphorePermit<'_>> {
        let _waiting = Waiting::new(&self.waiting);
        self.turns.acquire().await.ok()
    }

    pub(super) fn debug_state(&self) -> Value {
        json!({
            "atOnce": self.at_once,
            "inUse": self.at_once.saturating_sub(self.turns.available_permits()),
            "waiting": self.waiting.load(Ordering::Relaxed),
        })
    }
}
