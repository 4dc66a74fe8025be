//! The address peers use to reach a supervised actor. It belongs to the child's slot, not to
//! an actor instance: it stays valid across restarts, and what is sent while the actor is
//! down waits in the queue for the next instance. A full or closed mailbox fails the send
//! with an error; nothing is dropped silently.

use std::sync::Arc;

use actix::{Actor, Handler, Message};
use tokio::sync::oneshot;

use crate::{
    bound::Bound,
    envelope::Envelope,
    inbox::Inbox,
    queue::{Queue, Receiving},
    stats::MailboxStats,
};

/// Creates the bounded, counted queue of one actor: the sender side for peers and the
/// inbox the supervisor hands to each new instance. The queue grows with what is queued, up
/// to `capacity` (see [`Bound`]).
pub fn mailbox<A: Actor>(capacity: usize) -> (Mailbox<A>, Inbox<A>) {
    let capacity = capacity.max(1);
    let queue = Arc::new(Queue::new());
    let stats = Arc::new(MailboxStats::new(capacity));
    let bound = Arc::new(Bound::new(capacity));
    let inbox = Inbox::new(
        Receiving(Arc::clone(&queue)),
        Arc::clone(&stats),
        Arc::clone(&bound),
    );
    (
        Mailbox {
            queue,
            stats,
            bound,
        },
        inbox,
    )
}

/// A restart-surviving, instrumented address of actor `A`. Cheap to clone.
pub struct Mailbox<A: Actor> {
    queue: Arc<Queue<Envelope<A>>>,
    stats: Arc<MailboxStats>,
    bound: Arc<Bound>,
}

impl<A: Actor> Clone for Mailbox<A> {
    fn clone(&self) -> Self {
        Self {
            queue: Arc::clone(&self.queue),
            stats: Arc::clone(&self.stats),
            bound: Arc::clone(&self.bound),
        }
    }
}

/// Why a message could not be queued. The message is handed back so the caller can retry,
/// buffer or report it.
#[derive(thiserror::Error)]
pub enum SendError<M> {
    /// The queue is at capacity: the actor is slow or down. Retrying later may help.
    #[error("mailbox is full")]
    Full(M),
    /// The actor will never run again (not restarted, or its supervisor escalated).
    #[error("mailbox is closed: the actor is not running and will not be restarted")]
    Closed(M),
}

impl<M> std::fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

/// Why a request got no reply.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("mailbox is full")]
    Full,
    #[error("mailbox is closed: the actor is not running and will not be restarted")]
    Closed,
    /// The instance handling the request stopped (it failed, or was killed) before replying.
    #[error("the actor stopped before replying")]
    NoReply,
}

impl<A: Actor> Mailbox<A> {
    /// Queues `message` without waiting; fails at once when the queue is full or closed.
    pub fn try_send<M>(&self, message: M) -> Result<(), SendError<M>>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        if self.queue.is_closed() {
            return Err(SendError::Closed(message));
        }
        if !self.bound.reserve() {
            return Err(SendError::Full(message));
        }
        self.push(Envelope::new(message, None))
            .map_err(|envelope| SendError::Closed(unwrap_returned(envelope)))
    }

    /// Queues an envelope whose place is claimed; hands it back (and the place) when closed.
    fn push(&self, envelope: Envelope<A>) -> Result<(), Envelope<A>> {
        // The queue under the bound is unbounded: a push can only fail on a closed mailbox.
        self.queue
            .push(envelope)
            .inspect_err(|_| self.bound.release())
    }

    /// Queues `message`, waiting while the queue is full.
    pub async fn send<M>(&self, message: M) -> Result<(), SendError<M>>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        if !self.bound.reserve_waiting(|| self.queue.is_closed()).await {
            return Err(SendError::Closed(message));
        }
        self.push(Envelope::new(message, None))
            .map_err(|envelope| SendError::Closed(unwrap_returned(envelope)))
    }

    /// Queues `message` (waiting while full) and waits for the handler's reply.
    pub async fn request<M>(&self, message: M) -> Result<M::Result, RequestError>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        if !self.bound.reserve_waiting(|| self.queue.is_closed()).await {
            return Err(RequestError::Closed);
        }
        let (reply_to, reply) = oneshot::channel();
        if self.push(Envelope::new(message, Some(reply_to))).is_err() {
            return Err(RequestError::Closed);
        }
        reply.await.map_err(|_| RequestError::NoReply)
    }

    /// Messages waiting now.
    pub fn depth(&self) -> usize {
        self.queue.len()
    }

    pub fn stats(&self) -> &MailboxStats {
        &self.stats
    }
}

/// An envelope refused by the channel is the one just built from an `M`, so the downcast
/// cannot fail; the panic documents that invariant rather than guarding input.
fn unwrap_returned<A: Actor, M: Message + 'static>(envelope: Envelope<A>) -> M {
    envelope
        .into_message::<M>()
        .expect("a refused envelope holds the message it was built from")
}

/// A restart-surviving address for one message type, whatever actor handles it: what a
/// producer holds when it should not know its consumer's type.
pub struct Recipient<M: Message> {
    send: Arc<dyn Fn(M) -> Result<(), SendError<M>> + Send + Sync>,
}

impl<M: Message> Clone for Recipient<M> {
    fn clone(&self) -> Self {
        Self {
            send: Arc::clone(&self.send),
        }
    }
}

impl<M: Message + Send + 'static> Recipient<M>
where
    M::Result: Send,
{
    /// Queues `message` without waiting, like [`Mailbox::try_send`].
    pub fn try_send(&self, message: M) -> Result<(), SendError<M>> {
        (self.send)(message)
    }

    /// A recipient that hands each message to `send` (a fan-out to several actors, say).
    pub fn from_fn(send: impl Fn(M) -> Result<(), SendError<M>> + Send + Sync + 'static) -> Self {
        Self {
            send: Arc::new(send),
        }
    }
}

impl<A: Actor> Mailbox<A> {
    /// This mailbox as a [`Recipient`] of `M`.
    pub fn recipient<M>(&self) -> Recipient<M>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        let mailbox = self.clone();
        Recipient {
            send: Arc::new(move |message| mailbox.try_send(message)),
        }
    }
}
