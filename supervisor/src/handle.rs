//! What the rest of the daemon holds of a running supervisor: read its children's figures
//! (lock-free, without asking the supervisor), kill one on purpose, wait for escalation, shut
//! down. Cheap to clone.

use std::{sync::Arc, time::Duration};

use actix::Addr;
use tokio::{sync::watch, time::Instant};

use crate::{
    ActorSnapshot, Escalation, KillMode,
    child::{ChildState, ChildStatus},
    drain,
    snapshot::snapshot,
    supervisor::{DebugState, Kill, KillAccepted, Shutdown, Supervisor},
};

/// Why a request about one actor (kill it, describe its state) could not be served.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ActorRequestError {
    #[error("no actor named {0:?}")]
    UnknownActor(String),
    #[error("actor {name:?} has no running instance (state {})", state.as_str())]
    NotRunning { name: String, state: ChildState },
    #[error("the actor did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the supervisor is not running")]
    SupervisorGone,
}

#[derive(Clone)]
pub struct SupervisorHandle {
    address: Addr<Supervisor>,
    node: Arc<str>,
    statuses: Arc<[Arc<ChildStatus>]>,
    escalation: watch::Receiver<Option<Escalation>>,
    unhealthy_after: Duration,
    drains: Arc<[crate::Drain]>,
}

impl SupervisorHandle {
    pub(crate) fn new(
        address: Addr<Supervisor>,
        node: String,
        statuses: Vec<Arc<ChildStatus>>,
        escalation: watch::Receiver<Option<Escalation>>,
        unhealthy_after: Duration,
        drains: Vec<crate::Drain>,
    ) -> Self {
        Self {
            address,
            node: node.into(),
            statuses: statuses.into(),
            escalation,
            unhealthy_after,
            drains: drains.into(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Every child's figures, in start order.
    pub fn actors(&self) -> Vec<ActorSnapshot> {
        self.statuses
            .iter()
            .map(|status| snapshot(status, &self.node))
            .collect()
    }

    pub fn actor(&self, name: &str) -> Option<ActorSnapshot> {
        self.statuses
            .iter()
            .find(|status| status.name == name)
            .map(|status| snapshot(status, &self.node))
    }

    /// The busy mark of actor `name`'s latest instance, for tests that stand in for a blocked
    /// handler (on paused time a real one would block the clock too).
    #[cfg(test)]
    pub(crate) fn instance_liveness(&self, name: &str) -> Option<Arc<crate::liveness::Liveness>> {
        let status = self.statuses.iter().find(|status| status.name == name)?;
        status.detail().liveness.clone()
    }

    /// The actor's own view of its state, as its `debug_state` returns it.
    pub async fn actor_state(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<serde_json::Value, ActorRequestError> {
        let reply = self
            .address
            .send(DebugState {
                name: name.to_owned(),
            })
            .await
            .map_err(|_| ActorRequestError::SupervisorGone)??;
        match tokio::time::timeout(timeout, reply).await {
            Ok(Ok(state)) => Ok(state),
            Ok(Err(_)) => Err(ActorRequestError::NotRunning {
                name: name.to_owned(),
                state: self
                    .actor(name)
                    .map_or(ChildState::Stopped, |actor| actor.state),
            }),
            Err(_) => Err(ActorRequestError::Timeout(timeout)),
        }
    }

    /// Fault injection: kills the running instance of `name` in the given way.
    pub async fn kill(
        &self,
        name: &str,
        mode: KillMode,
    ) -> Result<KillAccepted, ActorRequestError> {
        self.address
            .send(Kill {
                name: name.to_owned(),
                mode,
            })
            .await
            .map_err(|_| ActorRequestError::SupervisorGone)?
    }

    /// The escalation, if the supervisor has given up.
    pub fn escalation(&self) -> Option<Escalation> {
        self.escalation.borrow().clone()
    }

    /// Waits until the supervisor escalates.
    pub async fn escalated(&self) -> Escalation {
        let mut watch = self.escalation.clone();
        loop {
            if let Some(escalation) = watch.borrow_and_update().clone() {
                return escalation;
            }
            if watch.changed().await.is_err() {
                // The supervisor is gone without escalating: nothing will ever be published.
                futures::future::pending::<()>().await;
            }
        }
    }

    /// Reasons the node's actors are unhealthy: an escalated child, or one that has had no
    /// running instance for longer than a healthy restart takes. Empty when healthy.
    pub fn problems(&self) -> Vec<String> {
        let limit = self.unhealthy_after.as_secs_f64();
        self.actors()
            .into_iter()
            .filter(|actor| actor.state.is_unhealthy(actor.down_seconds, limit))
            .map(|actor| match actor.state {
                ChildState::Escalated => format!("actor {:?} escalated", actor.name),
                state => format!(
                    "actor {:?} is {} and has not run for {:.1}s",
                    actor.name,
                    state.as_str(),
                    actor.down_seconds.unwrap_or_default()
                ),
            })
            .collect()
    }

    /// Runs the drains (at most half of `deadline`), then stops every child and waits for
    /// their instances to end, all within `deadline`. Returns `false` when some instance did
    /// not end in time (a thread stuck in a handler).
    pub async fn shutdown(&self, deadline: Duration) -> bool {
        let started = Instant::now();
        let share = drain::share(deadline);
        if !drain::run(&self.drains, share).await {
            tracing::warn!(node = %self.node, ?share, "the shutdown drains did not finish in time; stopping anyway");
        }
        let left = deadline.saturating_sub(started.elapsed());
        matches!(
            tokio::time::timeout(left, self.address.send(Shutdown)).await,
            Ok(Ok(()))
        )
    }
}
