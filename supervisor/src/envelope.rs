//! A message boxed with its reply channel, so one queue can carry every message type an actor
//! handles. Handling it runs the actor's `Handler` and counts it in the mailbox statistics.

use std::any::Any;

use actix::{
    Actor, Handler, Message,
    dev::{MessageResponse, OneshotSender},
};
use tokio::time::Instant;

use crate::stats::MailboxStats;

/// One queued message for actor `A`.
pub struct Envelope<A: Actor>(Box<dyn EnvelopeProxy<A> + Send>);

trait EnvelopeProxy<A: Actor> {
    fn handle(self: Box<Self>, actor: &mut A, ctx: &mut A::Context, stats: &MailboxStats);
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

struct TypedEnvelope<M: Message> {
    message: M,
    reply_to: Option<OneshotSender<M::Result>>,
}

impl<A: Actor> Envelope<A> {
    pub(crate) fn new<M>(message: M, reply_to: Option<OneshotSender<M::Result>>) -> Self
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        Self(Box::new(TypedEnvelope { message, reply_to }))
    }

    pub(crate) fn handle(self, actor: &mut A, ctx: &mut A::Context, stats: &MailboxStats) {
        self.0.handle(actor, ctx, stats);
    }

    /// The message back out of an envelope that could not be queued.
    pub(crate) fn into_message<M: Message + 'static>(self) -> Option<M> {
        self.0
            .into_any()
            .downcast::<TypedEnvelope<M>>()
            .ok()
            .map(|typed| typed.message)
    }
}

impl<A, M> EnvelopeProxy<A> for TypedEnvelope<M>
where
    A: Actor + Handler<M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    fn handle(self: Box<Self>, actor: &mut A, ctx: &mut A::Context, stats: &MailboxStats) {
        let TypedEnvelope { message, reply_to } = *self;
        // A requester that gave up (timeout, dropped future) no longer needs the work done.
        if reply_to.as_ref().is_some_and(OneshotSender::is_closed) {
            return;
        }
        let started = Instant::now();
        let response = <A as Handler<M>>::handle(actor, message, ctx);
        // Counted before the reply leaves, so a requester never sees figures without its message.
        stats.record(std::any::type_name::<M>(), started, Instant::now());
        response.handle(ctx, reply_to);
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
