//! The receiving side of a mailbox. The supervisor keeps it across restarts and attaches each
//! new actor instance to it; a fence (the generation allowed to receive) keeps an instance the
//! supervisor has given up on, such as a hung one, from taking messages meant for its successor.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context as TaskContext, Poll},
};

use actix::{Actor, ActorContext, AsyncContext, Context, fut::ActorFuture};

use crate::{bound::Bound, envelope::Envelope, queue::Receiving, stats::MailboxStats};

/// Messages handled in one poll before the driver yields to the actor's other work.
const BATCH: usize = 16;

/// The generation of the instance allowed to receive; [`Fence::CLOSED`] while none is.
#[derive(Clone, Default)]
pub(crate) struct Fence(Arc<AtomicU64>);

impl Fence {
    pub(crate) const CLOSED: u64 = u64::MAX;

    pub(crate) fn admit(&self, generation: u64) {
        self.0.store(generation, Ordering::SeqCst);
    }

    pub(crate) fn close(&self) {
        self.0.store(Self::CLOSED, Ordering::SeqCst);
    }

    pub(crate) fn admits(&self, generation: u64) -> bool {
        self.0.load(Ordering::SeqCst) == generation
    }
}

/// The queue of one supervised actor, as held by its child slot.
pub struct Inbox<A: Actor> {
    /// The queue closes when no inbox and no instance's driver holds it any more; while the
    /// child slot keeps its inbox, closing is explicit ([`Inbox::close`]). An actor driven only
    /// by timers does not stop because no peer holds a `Mailbox`.
    receiving: Arc<Receiving<Envelope<A>>>,
    stats: Arc<MailboxStats>,
    bound: Arc<Bound>,
    pub(crate) fence: Fence,
}

impl<A: Actor> Clone for Inbox<A> {
    fn clone(&self) -> Self {
        Self {
            receiving: Arc::clone(&self.receiving),
            stats: Arc::clone(&self.stats),
            bound: Arc::clone(&self.bound),
            fence: self.fence.clone(),
        }
    }
}

impl<A: Actor> Inbox<A> {
    pub(crate) fn new(
        receiving: Receiving<Envelope<A>>,
        stats: Arc<MailboxStats>,
        bound: Arc<Bound>,
    ) -> Self {
        let fence = Fence::default();
        fence.close();
        Self {
            receiving: Arc::new(receiving),
            stats,
            bound,
            fence,
        }
    }

    pub(crate) fn depth(&self) -> usize {
        self.receiving.0.len()
    }

    pub(crate) fn stats(&self) -> &Arc<MailboxStats> {
        &self.stats
    }

    /// Refuses further sends; what is queued is still delivered to a running instance.
    pub(crate) fn close(&self) {
        self.receiving.0.close();
        self.bound.wake_all();
    }
}

impl<A: Actor<Context = Context<A>>> Inbox<A> {
    /// Makes instance `generation` consume this inbox for as long as the fence admits it.
    pub(crate) fn attach(&self, ctx: &mut Context<A>, generation: u64) {
        ctx.spawn(InboxDriver {
            receiving: Arc::clone(&self.receiving),
            stats: Arc::clone(&self.stats),
            bound: Arc::clone(&self.bound),
            fence: self.fence.clone(),
            generation,
        });
    }
}

/// Feeds queued envelopes to one actor instance, as actix's own stream handling does:
/// it pauses while the actor waits on a future and yields after a batch.
struct InboxDriver<A: Actor> {
    receiving: Arc<Receiving<Envelope<A>>>,
    stats: Arc<MailboxStats>,
    bound: Arc<Bound>,
    fence: Fence,
    generation: u64,
}

impl<A: Actor<Context = Context<A>>> ActorFuture<A> for InboxDriver<A> {
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        actor: &mut A,
        ctx: &mut Context<A>,
        task: &mut TaskContext<'_>,
    ) -> Poll<()> {
        let this = self.get_mut();
        for _ in 0..BATCH {
            if !this.fence.admits(this.generation) {
                ctx.stop();
                return Poll::Ready(());
            }
            match this.receiving.0.poll_pop(this.generation, task) {
                Poll::Ready(Some((envelope, depth))) => {
                    // Depth before the take: the high-water mark is kept on this side only.
                    this.stats.observe_depth(depth);
                    this.bound.release();
                    envelope.handle(actor, ctx, &this.stats);
                    if ctx.waiting() {
                        return Poll::Pending;
                    }
                }
                Poll::Ready(None) => {
                    tracing::debug!("mailbox closed; stopping the instance");
                    ctx.stop();
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        task.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<A: Actor> Drop for InboxDriver<A> {
    fn drop(&mut self) {
        self.receiving.0.forget(self.generation);
    }
}
