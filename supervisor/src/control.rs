//! The supervisor's private line to one actor instance: state snapshots for the debug endpoint
//! and fault injection. It is separate from the mailbox so a full queue never delays them, and
//! quiet unless asked. Dropping the supervisor's end stops the instance.

use std::{
    pin::Pin,
    sync::mpsc as blocking,
    task::{Context as TaskContext, Poll},
};

use actix::{ActorContext, AsyncContext, Context, fut::ActorFuture};
use futures::{StreamExt, channel::mpsc};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::{SupervisedActor, guard::ExitGuard, inbox::Fence};

/// How to kill an actor on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KillMode {
    /// Stop the instance as if it had stopped itself.
    Stop,
    /// Panic inside the actor's task.
    Panic,
    /// Block the actor's thread, so it answers nothing until the supervisor gives up on it.
    Hang,
}

impl std::str::FromStr for KillMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "stop" => Ok(Self::Stop),
            "panic" => Ok(Self::Panic),
            "hang" => Ok(Self::Hang),
            other => Err(format!(
                "unknown kill mode {other:?}: expected stop, panic or hang"
            )),
        }
    }
}

impl std::fmt::Display for KillMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Stop => "stop",
            Self::Panic => "panic",
            Self::Hang => "hang",
        })
    }
}

pub(crate) enum Control {
    Snapshot(oneshot::Sender<serde_json::Value>),
    Kill(KillMode, blocking::Receiver<()>),
}

/// Attaches the control line and the exit guard to a starting instance. The guard lives as long
/// as the instance's context, so its drop reports the instance's end.
pub(crate) fn attach<A: SupervisedActor>(
    ctx: &mut Context<A>,
    receiver: mpsc::UnboundedReceiver<Control>,
    guard: ExitGuard,
    fence: Fence,
    generation: u64,
) {
    ctx.spawn(ControlDriver {
        receiver,
        _guard: guard,
        fence,
        generation,
    });
}

struct ControlDriver {
    receiver: mpsc::UnboundedReceiver<Control>,
    _guard: ExitGuard,
    fence: Fence,
    generation: u64,
}

impl<A: SupervisedActor> ActorFuture<A> for ControlDriver {
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        actor: &mut A,
        ctx: &mut Context<A>,
        task: &mut TaskContext<'_>,
    ) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if !this.fence.admits(this.generation) {
                ctx.stop();
                // Stay pending: the guard must live until the context itself is dropped.
                return Poll::Pending;
            }
            match this.receiver.poll_next_unpin(task) {
                Poll::Ready(Some(Control::Snapshot(reply))) => {
                    let _ = reply.send(actor.debug_state());
                }
                Poll::Ready(Some(Control::Kill(mode, release))) => kill(mode, &release, ctx),
                Poll::Ready(None) => {
                    ctx.stop();
                    return Poll::Pending;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

fn kill<A: SupervisedActor>(
    mode: KillMode,
    release: &blocking::Receiver<()>,
    ctx: &mut Context<A>,
) {
    tracing::warn!(%mode, "killing actor instance on request (fault injection)");
    match mode {
        KillMode::Stop => ctx.stop(),
        KillMode::Panic => panic!("fault injection: panic requested through the debug endpoint"),
        KillMode::Hang => {
            // A real blocked thread: the supervisor can only notice it by the poll that never ends.
            // It returns once the supervisor has fenced this instance off and let go.
            let _ = release.recv();
        }
    }
}
