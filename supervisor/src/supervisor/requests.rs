//! The requests the supervisor answers for the rest of the daemon: kill an actor on purpose,
//! describe an actor's own state, and shut every actor down.

use std::sync::mpsc as blocking;

use actix::{AsyncContext, Context, Handler, Message};
use futures::channel::mpsc;
use tokio::sync::oneshot;

use super::Supervisor;
use crate::{
    child::ChildState,
    control::{Control, KillMode},
};

/// Asks the supervisor to kill a child's running instance.
pub(crate) struct Kill {
    pub name: String,
    pub mode: KillMode,
}

impl Message for Kill {
    type Result = Result<KillAccepted, crate::ActorRequestError>;
}

/// A kill that was delivered to the instance.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KillAccepted {
    pub actor: String,
    pub mode: KillMode,
    pub generation: u64,
}

impl Handler<Kill> for Supervisor {
    type Result = Result<KillAccepted, crate::ActorRequestError>;

    fn handle(&mut self, kill: Kill, _ctx: &mut Context<Self>) -> Self::Result {
        let slot = self
            .slots
            .iter_mut()
            .find(|slot| slot.runtime.status().name == kill.name)
            .ok_or_else(|| crate::ActorRequestError::UnknownActor(kill.name.clone()))?;
        let state = slot.runtime.status().state();
        let instance = match (&mut slot.instance, state) {
            (Some(instance), ChildState::Running) => instance,
            _ => {
                return Err(crate::ActorRequestError::NotRunning {
                    name: kill.name,
                    state,
                });
            }
        };
        let (release, hold) = blocking::channel();
        if kill.mode == KillMode::Hang {
            instance.hang_release = Some(release);
        }
        instance.kill_requested = Some(kill.mode);
        instance
            .control
            .unbounded_send(Control::Kill(kill.mode, hold))
            .map_err(|_| crate::ActorRequestError::NotRunning {
                name: kill.name.clone(),
                state,
            })?;
        Ok(KillAccepted {
            actor: kill.name,
            mode: kill.mode,
            generation: instance.generation,
        })
    }
}

/// Asks a running instance for its own view of its state.
pub(crate) struct DebugState {
    pub name: String,
}

impl Message for DebugState {
    type Result = Result<oneshot::Receiver<serde_json::Value>, crate::ActorRequestError>;
}

impl Handler<DebugState> for Supervisor {
    type Result = Result<oneshot::Receiver<serde_json::Value>, crate::ActorRequestError>;

    fn handle(&mut self, request: DebugState, _ctx: &mut Context<Self>) -> Self::Result {
        let slot = self
            .slots
            .iter()
            .find(|slot| slot.runtime.status().name == request.name)
            .ok_or_else(|| crate::ActorRequestError::UnknownActor(request.name.clone()))?;
        let state = slot.runtime.status().state();
        let (reply_to, reply) = oneshot::channel();
        slot.instance
            .as_ref()
            .and_then(|instance| {
                instance
                    .control
                    .unbounded_send(Control::Snapshot(reply_to))
                    .ok()
            })
            .ok_or(crate::ActorRequestError::NotRunning {
                name: request.name,
                state,
            })?;
        Ok(reply)
    }
}

/// Stops every child for good; answered once every instance has ended.
pub(crate) struct Shutdown;

impl Message for Shutdown {
    type Result = ();
}

impl Handler<Shutdown> for Supervisor {
    type Result = actix::ResponseFuture<()>;

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        self.shutting_down = true;
        let (done, waiter) = oneshot::channel();
        self.shutdown_waiters.push(done);
        for slot in self.slots.iter_mut().rev() {
            if let Some(handle) = slot.pending_restart.take() {
                ctx.cancel_future(handle);
            }
            slot.runtime.close_mailbox();
            if slot.instance.is_none() {
                slot.runtime.status().set_state(ChildState::Stopped);
            }
            // Dropping the control line stops the instance; its guard then reports the end.
            if let Some(instance) = slot.instance.as_mut() {
                let (closed, _) = mpsc::unbounded();
                instance.control = closed;
                instance.hang_release = None;
            }
        }
        self.answer_shutdown_if_done();
        Box::pin(async move {
            let _ = waiter.await;
        })
    }
}
