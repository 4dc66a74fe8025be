//! A mailbox's capacity, kept by count instead of by a buffer allocated whole: the queue under
//! it grows and shrinks with what is queued, so an idle actor holds no slots. (A bounded queue
//! of 64 held 1.5 KiB an actor whether used or not; at the default 1,024, 24 KiB.)

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

pub(crate) struct Bound {
    capacity: usize,
    /// Places claimed: messages queued, plus those being pushed right now.
    queued: AtomicUsize,
    /// Senders waiting for a place: a taken message notifies only when there are any, so
    /// the common case costs one atomic, not two.
    waiting: AtomicUsize,
    /// Woken when a message is taken (or the mailbox closes), for senders waiting while full.
    space: Notify,
}

impl Bound {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            queued: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            space: Notify::new(),
        }
    }

    /// Claims the place of one message; `false` when `capacity` are queued.
    pub(crate) fn reserve(&self) -> bool {
        self.queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                (queued < self.capacity).then_some(queued + 1)
            })
            .is_ok()
    }

    /// Gives a place back: its message was taken, or never queued.
    pub(crate) fn release(&self) {
        // SeqCst with `reserve_waiting`'s announcement: either the waiter is seen here, or the
        // freed place is seen by its check after announcing.
        self.queued.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.space.notify_one();
        }
    }

    /// Waits until a place is claimed, or `closed` says the mailbox will take nothing more
    /// (then `false`).
    pub(crate) async fn reserve_waiting(&self, closed: impl Fn() -> bool) -> bool {
        loop {
            if closed() {
                return false;
            }
            if self.reserve() {
                return true;
            }
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // Created before the checks: a release or close between them still wakes it.
            let space = self.space.notified();
            let decided = if closed() {
                Some(false)
            } else {
                self.reserve().then_some(true)
            };
            if decided.is_none() {
                space.await;
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if let Some(reserved) = decided {
                return reserved;
            }
        }
    }

    /// Wakes every waiting sender, to find the mailbox closed.
    pub(crate) fn wake_all(&self) {
        self.space.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::Bound;

    #[test]
    fn places_are_claimed_up_to_the_capacity_and_given_back() {
        let bound = Bound::new(2);
        assert!(bound.reserve());
        assert!(bound.reserve());
        assert!(!bound.reserve(), "full at 2");
        bound.release();
        assert!(bound.reserve(), "a taken message frees its place");
    }

    #[tokio::test]
    async fn a_waiting_sender_gets_the_place_a_taken_message_frees() {
        let bound = Arc::new(Bound::new(1));
        assert!(bound.reserve());
        let waiter = tokio::spawn({
            let bound = Arc::clone(&bound);
            async move { bound.reserve_waiting(|| false).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "it waits while full");
        bound.release();
        let claimed = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .expect("joined");
        assert!(claimed);
        assert!(!bound.reserve(), "the waiter holds the place");
    }

    #[tokio::test]
    async fn a_waiting_sender_is_told_when_the_mailbox_closes() {
        let bound = Arc::new(Bound::new(1));
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        assert!(bound.reserve());
        let waiter = tokio::spawn({
            let (bound, closed) = (Arc::clone(&bound), Arc::clone(&closed));
            async move {
                bound
                    .reserve_waiting(|| closed.load(std::sync::atomic::Ordering::SeqCst))
                    .await
            }
        });
        tokio::task::yield_now().await;
        closed.store(true, std::sync::atomic::Ordering::SeqCst);
        bound.wake_all();
        let claimed = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .expect("joined");
        assert!(!claimed);
    }
}
