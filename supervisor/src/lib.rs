//! Supervised actix actors for nodepulse, modelled on Erlang/OTP supervisors.
//!
//! actix restarts a stopped actor and nothing more; this crate adds what a node agent needs:
//! - [`mailbox`]: a bounded, counted queue whose [`Mailbox`] address survives restarts, so
//!   nothing sent to an actor that is down is lost, and a full queue is an error, not a drop.
//! - [`Supervisor`]: starts children from a [`ChildSpec`], detects a stop, a panic (exit guard)
//!   or a hang (one poll of the instance busy past `liveness_timeout`; nothing is sent to an
//!   idle actor), restarts with [`BackoffPolicy`], and escalates past its [`IntensityPolicy`].
//! - [`Kept`]: state a child's factory hands to every instance, kept across restarts and panics.
//! - [`SupervisorHandle`]: the debug view ([`ActorSnapshot`]), fault injection ([`KillMode`])
//!   and shutdown, for the daemon's debug endpoint.
//!
//! Layout: `mailbox`/`envelope`/`inbox`/`stats` (the queue), `control`/`guard`/`panic_capture`/
//! `liveness`/`hang_check` (one instance's lifeline, and who looks at it), `backoff`/`intensity` (pure restart policy), `arbiters`
//! (threads), `child`/`supervisor`/`handle`/`snapshot` (supervision itself), `kept` (state
//! across restarts).

mod arbiters;
mod backoff;
mod bound;
mod child;
mod control;
mod drain;
mod envelope;
mod guard;
mod handle;
mod hang_check;
mod inbox;
mod intensity;
mod kept;
mod liveness;
mod mailbox;
mod panic_capture;
mod queue;
mod snapshot;
mod stats;
mod supervisor;

pub use arbiters::SharedArbiters;
pub use backoff::{BackoffPolicy, RestartBackoff};
pub use child::{ChildSpec, ChildState, Failure, RestartPolicy};
pub use control::KillMode;
pub use drain::Drain;
pub use handle::{ActorRequestError, SupervisorHandle};
pub use inbox::Inbox;
pub use intensity::{IntensityPolicy, RestartIntensity, TokioClock};
pub use kept::Kept;
pub use mailbox::{Mailbox, Recipient, RequestError, SendError, mailbox};
pub use snapshot::ActorSnapshot;
pub use stats::{LastMessage, MailboxSnapshot, QueueGauge};
pub use supervisor::{Escalation, KillAccepted, Supervisor, SupervisorBuilder, SupervisorConfig};

/// An actor the supervisor can run: an actix actor on its own `Context`, with a view of its
/// state for the debug endpoint.
pub trait SupervisedActor: actix::Actor<Context = actix::Context<Self>> {
    /// The actor's own state as JSON for `GET /debug/actors/{name}`; nothing by default.
    fn debug_state(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
