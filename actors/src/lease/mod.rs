//! LeaseActor: renews the Node's Lease in `kube-node-lease` every quarter of its duration,
//! with the kubelet's jitter, conflict handling and backoff. It owns only its cache of the
//! latest Lease; after a restart it re-reads the Lease from the API server, whose renewTime
//! keeps the next one moving forward. Renewal is independent of status computation. In a
//! fleet, each actor starts at a random phase of the interval, so nodes started together do
//! not renew in step.

#[cfg(test)]
mod actor_tests;
pub mod lag;
mod renewal;
mod round;
#[cfg(test)]
mod round_tests;

use std::{sync::Arc, time::Duration};

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, SpawnHandle, StreamHandler, WrapFuture,
};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use nodepulse_supervisor::SupervisedActor;
use serde_json::json;
use tokio::time::Instant;

pub use renewal::{
    RENEW_JITTER, jittered, new_lease, next_renew_time, node_owner, renew_interval, renewal_of,
    start_phase,
};
pub use round::{RoundContext, RoundError, RoundOutcome};

use crate::{
    clock::{self, WallClock},
    messages::NodeRegistered,
    ports::{ApiRecovered, LeaseApi, warn_unless_unreachable},
};

/// The name LeaseActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "lease";

/// What the LeaseActor is configured with.
#[derive(Clone)]
pub struct LeaseSettings {
    pub node: String,
    /// `nodeLeaseDurationSeconds` (40).
    pub lease_duration_seconds: i32,
}

pub struct LeaseActor {
    settings: LeaseSettings,
    api: Arc<dyn LeaseApi>,
    latest: Option<Lease>,
    node_uid: Option<String>,
    round_started: Option<Instant>,
    rounds: u64,
    failed_rounds_in_a_row: u64,
    last_result: Option<(Timestamp, Result<(), RoundError>)>,
    /// How long after start the first round waits.
    first_wait: Duration,
    /// When the current or next round is due, for [`lag::RENEWAL_LAG`].
    due: Option<Instant>,
    /// The timer of the next round, cancelled when the API server's return starts it early.
    next_round: Option<SpawnHandle>,
    /// The API server came back while a round was running: if that round still failed (its
    /// last attempt was before the return), the next one starts at once, not an interval later.
    recovered_during_round: bool,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
}

impl LeaseActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl LeaseActor {
    pub fn new(settings: LeaseSettings, api: Arc<dyn LeaseApi>) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            api,
            latest: None,
            node_uid: None,
            round_started: None,
            rounds: 0,
            failed_rounds_in_a_row: 0,
            last_result: None,
            first_wait: Duration::ZERO,
            due: None,
            next_round: None,
            recovered_during_round: false,
        }
    }

    /// Waits `phase` before the first round (a fleet draws it with [`start_phase`]).
    #[must_use]
    pub fn with_first_wait(mut self, phase: Duration) -> Self {
        self.first_wait = phase;
        self
    }

    fn start_round(&mut self, ctx: &mut Context<Self>) {
        if self.round_started.is_some() {
            return;
        }
        if let Some(timer) = self.next_round.take() {
            ctx.cancel_future(timer);
        }
        self.round_started = Some(Instant::now());
        self.recovered_during_round = false;
        let context = RoundContext {
            api: Arc::clone(&self.api),
            node: self.settings.node.clone(),
            lease_duration_seconds: self.settings.lease_duration_seconds,
            now: Arc::clone(&self.wall_clock),
        };
        let round = round::renew(context, self.latest.clone(), self.node_uid.clone());
        // Spawned, not awaited: the mailbox and liveness pings stay served while a round waits.
        ctx.spawn(round.into_actor(self).map(|outcome, actor, ctx| {
            actor.finish_round(outcome);
            let retry_now = std::mem::take(&mut actor.recovered_during_round)
                && actor.failed_rounds_in_a_row > 0;
            // Sliding: the next wait starts once this round is over, as the kubelet's loop does.
            let wait = if retry_now {
                Duration::ZERO
            } else {
                jittered(
                    renew_interval(actor.settings.lease_duration_seconds),
                    rand::random::<f64>(),
                )
            };
            // After a failed round the old deadline stands: the lag of the renewal that
            // finally lands counts from the first one missed.
            actor.due.get_or_insert(Instant::now() + wait);
            actor.next_round = Some(ctx.run_later(wait, |actor, ctx| {
                actor.next_round = None;
                actor.start_round(ctx);
            }));
        }));
    }

    fn finish_round(&mut self, outcome: RoundOutcome) {
        self.round_started = None;
        self.rounds += 1;
        if outcome.latest.is_some() {
            self.latest = outcome.latest;
        }
        if outcome.node_uid.is_some() {
            self.node_uid = outcome.node_uid;
        }
        match &outcome.result {
            Ok(()) => {
                self.failed_rounds_in_a_row = 0;
                if let Some(due) = self.due.take() {
                    lag::RENEWAL_LAG.record(due.elapsed());
                }
            }
            Err(error) => {
                self.failed_rounds_in_a_row += 1;
                warn_unless_unreachable!(self.api.recovery(), %error, failed_rounds_in_a_row = self.failed_rounds_in_a_row, "lease renewal failed");
            }
        }
        self.last_result = Some(((self.wall_clock)(), outcome.result));
    }
}

impl Actor for LeaseActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.add_stream(self.api.recovery().stream());
        if self.first_wait.is_zero() {
            self.start_round(ctx);
        } else {
            self.due = Some(Instant::now() + self.first_wait);
            ctx.run_later(self.first_wait, |actor, ctx| actor.start_round(ctx));
        }
    }
}

/// After failed rounds the next one waits a whole renew interval; the API server's return
/// starts it at once (a round still retrying wakes by itself).
impl StreamHandler<ApiRecovered> for LeaseActor {
    fn handle(&mut self, _: ApiRecovered, ctx: &mut Context<Self>) {
        if self.round_started.is_some() {
            self.recovered_during_round = true;
        } else if self.failed_rounds_in_a_row > 0 {
            self.start_round(ctx);
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl Handler<NodeRegistered> for LeaseActor {
    type Result = ();

    fn handle(&mut self, registered: NodeRegistered, _: &mut Context<Self>) {
        self.node_uid = Some(registered.uid);
    }
}

impl SupervisedActor for LeaseActor {
    fn debug_state(&self) -> serde_json::Value {
        let latest = self.latest.as_ref().map(|lease| {
            let spec = lease.spec.as_ref();
            json!({
                "resourceVersion": lease.metadata.resource_version,
                "holderIdentity": spec.and_then(|spec| spec.holder_identity.clone()),
                "renewTime": spec.and_then(|spec| spec.renew_time.as_ref()).map(|time| time.0.to_string()),
                "leaseDurationSeconds": spec.and_then(|spec| spec.lease_duration_seconds),
                "owned": lease.metadata.owner_references.as_ref().is_some_and(|owners| !owners.is_empty()),
            })
        });
        json!({
            "node": self.settings.node,
            "latestLease": latest,
            "nodeUid": self.node_uid,
            "rounds": self.rounds,
            "roundInProgressSeconds": self.round_started.map(|started| started.elapsed().as_secs_f64()),
            "failedRoundsInARow": self.failed_rounds_in_a_row,
            "lastResult": self.last_result.as_ref().map(|(at, result)| json!({
                "at": at.to_string(),
                "ok": result.is_ok(),
                "error": result.as_ref().err().map(ToString::to_string),
            })),
        })
    }
}
