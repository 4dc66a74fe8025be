//! State the factory hands to every generation of an actor: what a restarted instance must
//! not forget (the last runtime health, a probe's results, pressure timers, pod statuses).
//! A panic while the state is held must not lose it either, so a poisoned lock is recovered
//! with its value, never replaced by a default.

use std::{
    fmt,
    sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError},
};

/// Shared state that outlives the instances of one actor. Cheap to clone: clones share it.
pub struct Kept<T> {
    inner: Arc<Mutex<T>>,
}

impl<T> Kept<T> {
    pub fn new(value: T) -> Self {
        Self {
            inner: Arc::new(Mutex::new(value)),
        }
    }

    /// The state, for a few steps in a row. Never hold it across an `.await`.
    ///
    /// A lock poisoned by a panic in an earlier holder is taken over with its value: every
    /// user of `Kept` keeps state that is consistent after each single change, and losing it
    /// is exactly what `Kept` exists to prevent (a restarted NodeStatus would post NotReady).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().unwrap_or_else(|poisoned| {
            self.inner.clear_poison();
            PoisonError::into_inner(poisoned)
        })
    }

    /// Reads the state.
    pub fn read<R>(&self, read: impl FnOnce(&T) -> R) -> R {
        read(&self.lock())
    }

    /// Changes the state.
    pub fn update<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        change(&mut self.lock())
    }
}

impl<T: Clone> Kept<T> {
    /// A copy of the state.
    pub fn get(&self) -> T {
        self.read(T::clone)
    }
}

impl<T> Clone for Kept<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Default> Default for Kept<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

/// Shows the state, or `<locked>` while someone holds it: a `Debug` inside `update` (a log
/// line, say) must not wait for its own lock.
impl<T: fmt::Debug> fmt::Debug for Kept<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.inner.try_lock() {
            Ok(state) => f.debug_tuple("Kept").field(&*state).finish(),
            Err(TryLockError::Poisoned(poisoned)) => f
                .debug_tuple("Kept")
                .field(&*poisoned.into_inner())
                .finish(),
            Err(TryLockError::WouldBlock) => f.write_str("Kept(<locked>)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;

    #[test]
    fn clones_share_one_state() {
        let kept = Kept::new(1);
        let other = kept.clone();
        other.update(|value| *value += 1);
        assert_eq!(kept.get(), 2);
        assert_eq!(kept.read(|value| *value * 10), 20);
    }

    #[test]
    fn a_panic_while_updating_keeps_what_was_written_before_it() {
        let kept = Kept::new(vec!["healthy"]);
        let generation = kept.clone();
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            generation.update(|value| {
                value.push("pressure");
                panic!("the instance dies mid-update");
            });
        }));
        assert!(panicked.is_err());
        assert_eq!(
            kept.get(),
            vec!["healthy", "pressure"],
            "the next instance finds the state, not a default"
        );
        kept.update(|value| value.push("again"));
        assert_eq!(kept.read(Vec::len), 3, "and can keep changing it");
    }

    #[test]
    fn debug_shows_the_state_and_never_waits_for_its_own_lock() {
        let kept = Kept::new(7);
        assert_eq!(format!("{kept:?}"), "Kept(7)");
        let shown = kept.update(|_| format!("{kept:?}"));
        assert_eq!(shown, "Kept(<locked>)");
    }
}
