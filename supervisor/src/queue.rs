//! The unbounded FIFO under a mailbox: a locked `VecDeque` and the wakers of the instances
//! waiting on it. A mailbox's capacity is kept by [`Bound`](crate::bound::Bound); this only
//! holds what is queued.
//!
//! async-channel held a 31-slot block once a queue had been used, three event lists and a
//! listener per receiver: about 1.4 KiB an actor, 10 KiB a node in a fleet where most actors
//! are idle. This holds a `VecDeque` as large as the most ever queued and one waker a waiting
//! instance. A handful of messages a second per actor never contend for the lock.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll, Waker},
};

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
    /// Receivers waiting for an item, by receiver id. Usually one (the running instance); a
    /// second while an instance the supervisor gave up on has not yet seen its fence, so both
    /// are woken and neither can take the other's wake-up away.
    waiting: Vec<(u64, Waker)>,
}

impl<T> Queue<T> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                closed: false,
                waiting: Vec::new(),
            }),
        }
    }

    /// A panic never happens while the lock is held (only `VecDeque`/`Vec` operations and
    /// `wake` run under it), so a poisoned lock still guards consistent state.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `item`; hands it back when the queue is closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.lock();
        if state.closed {
            return Err(item);
        }
        state.items.push_back(item);
        state.wake_all();
        Ok(())
    }

    /// The next item for receiver `receiver`, with how many were queued just before it was
    /// taken (one lock for both, on every message); `None` once the queue is closed and empty.
    pub(crate) fn poll_pop(
        &self,
        receiver: u64,
        task: &mut Context<'_>,
    ) -> Poll<Option<(T, usize)>> {
        let mut state = self.lock();
        let depth = state.items.len();
        if let Some(item) = state.items.pop_front() {
            return Poll::Ready(Some((item, depth)));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        match state.waiting.iter_mut().find(|(id, _)| *id == receiver) {
            Some((_, waker)) => waker.clone_from(task.waker()),
            None => state.waiting.push((receiver, task.waker().clone())),
        }
        Poll::Pending
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Refuses further pushes; what is queued can still be taken.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.wake_all();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Forgets a receiver that stopped, so its waker is not kept until the next push.
    pub(crate) fn forget(&self, receiver: u64) {
        self.lock().waiting.retain(|(id, _)| *id != receiver);
    }
}

impl<T> State<T> {
    /// Waking only schedules the receiver's task; it never runs it here, so waking under the
    /// lock cannot re-enter the queue.
    fn wake_all(&mut self) {
        for (_, waker) in self.waiting.drain(..) {
            waker.wake();
        }
    }
}

/// The receiving side's share of a queue: when the last one goes (the child slot and every
/// instance's driver), the queue closes, and senders learn that nothing will read it.
pub(crate) struct Receiving<T>(pub(crate) Arc<Queue<T>>);

impl<T> Drop for Receiving<T> {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        task::{Context, Poll, Wake, Waker},
    };

    use super::{Queue, Receiving};

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<CountingWaker>, Waker) {
        let counter = Arc::new(CountingWaker::default());
        (Arc::clone(&counter), Waker::from(counter))
    }

    #[test]
    fn items_come_out_in_order_and_closing_keeps_what_is_queued() {
        let queue = Queue::new();
        let (_, waker) = waker();
        let mut task = Context::from_waker(&waker);
        queue.push(1).expect("open");
        queue.push(2).expect("open");
        assert_eq!(queue.len(), 2);
        queue.close();
        assert_eq!(queue.push(3), Err(3), "a closed queue hands the item back");
        assert_eq!(queue.poll_pop(0, &mut task), Poll::Ready(Some((1, 2))));
        assert_eq!(queue.poll_pop(0, &mut task), Poll::Ready(Some((2, 1))));
        assert_eq!(queue.poll_pop(0, &mut task), Poll::Ready(None));
    }

    #[test]
    fn every_waiting_receiver_is_woken_by_a_push() {
        let queue = Queue::<u8>::new();
        let (old_count, old_waker) = waker();
        let (new_count, new_waker) = waker();
        assert!(
            queue
                .poll_pop(1, &mut Context::from_waker(&new_waker))
                .is_pending()
        );
        // An older receiver registering afterwards must not take the newer one's wake-up.
        assert!(
            queue
                .poll_pop(0, &mut Context::from_waker(&old_waker))
                .is_pending()
        );
        queue.push(7).expect("open");
        assert_eq!(old_count.0.load(Ordering::SeqCst), 1);
        assert_eq!(new_count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_receiver_polling_twice_is_woken_once() {
        let queue = Queue::<u8>::new();
        let (count, waker) = waker();
        let mut task = Context::from_waker(&waker);
        assert!(queue.poll_pop(0, &mut task).is_pending());
        assert!(queue.poll_pop(0, &mut task).is_pending());
        queue.push(7).expect("open");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_forgotten_receiver_is_not_woken() {
        let queue = Queue::<u8>::new();
        let (count, waker) = waker();
        assert!(
            queue
                .poll_pop(0, &mut Context::from_waker(&waker))
                .is_pending()
        );
        queue.forget(0);
        queue.push(7).expect("open");
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn closing_wakes_the_waiting_receiver() {
        let queue = Queue::<u8>::new();
        let (count, waker) = waker();
        assert!(
            queue
                .poll_pop(0, &mut Context::from_waker(&waker))
                .is_pending()
        );
        queue.close();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(queue.is_closed());
    }

    #[test]
    fn the_queue_closes_when_the_last_receiving_share_goes() {
        let queue = Arc::new(Queue::<u8>::new());
        let first = Arc::new(Receiving(Arc::clone(&queue)));
        let second = Arc::clone(&first);
        drop(first);
        assert!(!queue.is_closed(), "one share is left");
        drop(second);
        assert!(queue.is_closed());
        assert_eq!(queue.push(1), Err(1));
    }
}
