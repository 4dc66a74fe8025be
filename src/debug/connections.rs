//! The debug endpoint's open connections, at most a fixed number, without ever refusing a new
//! one: when full, the oldest connection that has not yet sent a whole request goes (it holds
//! a slot doing nothing), or, when every one is being answered, the oldest of all. So idle or
//! stalled clients, however many, cannot keep the liveness probe's `/healthz` out.

use std::{cell::Cell, collections::VecDeque, rc::Rc};

use futures::future::AbortHandle;

/// One open connection: whether its request arrived, and how to close it.
struct Open {
    id: u64,
    answering: Rc<Cell<bool>>,
    abort: AbortHandle,
}

/// The connections served now, oldest first. Lives on the endpoint's one thread.
pub struct Connections {
    cap: usize,
    next_id: u64,
    open: VecDeque<Open>,
}

/// What a new connection's task keeps: its id (to say it ended) and the flag it sets once its
/// request arrived.
pub struct Admitted {
    pub id: u64,
    pub answering: Rc<Cell<bool>>,
}

impl Connections {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            next_id: 0,
            open: VecDeque::new(),
        }
    }

    /// Makes room for one more (closing what must go) and counts the new one in; `abort`
    /// closes it.
    pub fn admit(&mut self, abort: AbortHandle) -> Admitted {
        while self.open.len() >= self.cap {
            let oldest_idle = self
                .open
                .iter()
                .position(|open| !open.answering.get())
                .unwrap_or(0);
            if let Some(evicted) = self.open.remove(oldest_idle) {
                evicted.abort.abort();
            }
        }
        self.next_id += 1;
        let answering = Rc::new(Cell::new(false));
        self.open.push_back(Open {
            id: self.next_id,
            answering: Rc::clone(&answering),
            abort,
        });
        Admitted {
            id: self.next_id,
            answering,
        }
    }

    /// The connection `id` ended (answered, timed out, gone or closed here).
    pub fn ended(&mut self, id: u64) {
        self.open.retain(|open| open.id != id);
    }

    #[cfg(test)]
    fn ids(&self) -> Vec<u64> {
        self.open.iter().map(|open| open.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use futures::future::{AbortHandle, Abortable, Pending, pending};

    use super::*;

    /// Admits one more; its future tells whether it was closed.
    fn admit(connections: &mut Connections) -> (Admitted, Abortable<Pending<()>>) {
        let (abort, registration) = AbortHandle::new_pair();
        (
            connections.admit(abort),
            Abortable::new(pending(), registration),
        )
    }

    #[test]
    fn a_full_table_closes_the_oldest_idle_connection_then_the_oldest_of_all() {
        let mut connections = Connections::new(3);
        let (first, first_task) = admit(&mut connections);
        let (_second, second_task) = admit(&mut connections);
        let (third, _third_task) = admit(&mut connections);
        first.answering.set(true);
        let (fourth, _fourth_task) = admit(&mut connections);
        assert_eq!(connections.ids(), vec![1, 3, 4], "the oldest idle one went");
        assert!(second_task.is_aborted() && !first_task.is_aborted());
        third.answering.set(true);
        fourth.answering.set(true);
        let _fifth = admit(&mut connections);
        assert_eq!(
            connections.ids(),
            vec![3, 4, 5],
            "all answering: the oldest went"
        );
        assert!(first_task.is_aborted());
        connections.ended(4);
        assert_eq!(connections.ids(), vec![3, 5]);
    }
}
