//! LogRotationActor, the kubelet's container log manager: every `containerLogMonitorInterval`
//! (10s) each running container of the node's PodsView whose log reached `containerLogMaxSize`
//! is rotated (`files.rs`), at most `containerLogMaxWorkers` at once, keeping at most
//! `containerLogMaxFiles` files per container. A pass is never stacked on a slow one; a failed
//! rotation is logged and tried again by the next pass. It never touches a stopped container's
//! log (it writes no more, and `previous` reads it).

mod files;
#[cfg(test)]
mod tests;

use std::{collections::VecDeque, path::PathBuf, sync::Arc, time::Duration};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, WrapFuture};
use futures::StreamExt;
use jiff::{Timestamp, tz::TimeZone};
use nodepulse_supervisor::{Kept, SupervisedActor};
use serde_json::json;

pub use files::{Outcome, Policy, RotationError, compress, plan, rotate, rotated_path};

use crate::{
    clock::{self, WallClock},
    ports::{ContainerRuntime, ContainerState, PodsView},
};

/// The name LogRotationActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "log-rotation";

/// How many rotations the debug view lists.
const ROTATIONS_KEPT: usize = 50;

/// The kubelet's `containerLog*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotationSettings {
    pub max_size: u64,
    pub max_files: usize,
    pub max_workers: usize,
    pub monitor_interval: Duration,
}

/// What outlives an instance: the rotations done lately.
#[derive(Debug, Clone, Default)]
pub struct RotationHistory {
    rotated_total: u64,
    failed_total: u64,
    rotations: VecDeque<(Timestamp, PathBuf)>,
}

pub struct LogRotationActor {
    settings: LogRotationSettings,
    runtime: Arc<dyn ContainerRuntime>,
    pods: PodsView,
    history: Kept<RotationHistory>,
    wall_clock: WallClock,
    zone: TimeZone,
    pass_running: bool,
    passes: u64,
    last_errors: Vec<String>,
}

impl LogRotationActor {
    /// `history` outlives the instance: the factory hands every instance the same one.
    pub fn new(
        settings: LogRotationSettings,
        runtime: Arc<dyn ContainerRuntime>,
        pods: PodsView,
        history: Kept<RotationHistory>,
    ) -> Self {
        Self {
            settings,
            runtime,
            pods,
            history,
            wall_clock: clock::system(),
            zone: TimeZone::system(),
            pass_running: false,
            passes: 0,
            last_errors: Vec::new(),
        }
    }

    /// Reads wall time from `clock` and names rotated files in `zone` (tests).
    #[must_use]
    pub fn with_time(mut self, clock: WallClock, zone: TimeZone) -> Self {
        self.wall_clock = clock;
        self.zone = zone;
        self
    }

    fn start_pass(&mut self, ctx: &mut Context<Self>) {
        if self.pass_running {
            return;
        }
        self.pass_running = true;
        let running: Vec<(String, PathBuf)> = self
            .pods
            .snapshot()
            .pods()
            .flat_map(|pod| pod.containers.iter())
            .filter(|container| container.state == ContainerState::Running)
            .map(|container| (container.id.clone(), container.log_path.clone()))
            .collect();
        let policy = Policy {
            max_size: self.settings.max_size,
            max_files: self.settings.max_files,
            zone: self.zone.clone(),
        };
        let (runtime, now) = (Arc::clone(&self.runtime), (self.wall_clock)());
        let workers = self.settings.max_workers.max(1);
        let pass = async move {
            let due = files::due(running, policy.max_size).await;
            futures::stream::iter(due)
                .map(move |(id, log)| {
                    let (runtime, policy) = (Arc::clone(&runtime), policy.clone());
                    async move {
                        let outcome = rotate(runtime, policy, id.clone(), log.clone(), now).await;
                        (id, log, outcome)
                    }
                })
                .buffer_unordered(workers)
                .collect::<Vec<_>>()
                .await
        };
        ctx.spawn(
            pass.into_actor(self)
                .map(move |outcomes, actor, _| actor.finish_pass(now, outcomes)),
        );
    }

    fn finish_pass(
        &mut self,
        at: Timestamp,
        outcomes: Vec<(String, PathBuf, Result<Outcome, RotationError>)>,
    ) {
        self.pass_running = false;
        self.passes += 1;
        self.last_errors.clear();
        let (mut rotated, mut failed) = (Vec::new(), 0);
        for (id, log, outcome) in outcomes {
            match outcome {
                Ok(Outcome::Rotated {
                    to,
                    removed,
                    compressed,
                }) => {
                    tracing::debug!(container_id = id, log = %log.display(), rotated = %to.display(), removed = removed.len(), compressed = compressed.len(), "rotated a container log");
                    rotated.push(to);
                }
                Ok(Outcome::Reopened) => {
                    tracing::info!(container_id = id, log = %log.display(), "a container's log was missing; the runtime reopened it");
                }
                Ok(Outcome::Small) => {}
                Err(error) => {
                    tracing::warn!(container_id = id, log = %log.display(), %error, "Failed to rotate log for container");
                    failed += 1;
                    self.last_errors.push(error.to_string());
                }
            }
        }
        self.history.update(|history| {
            history.failed_total += failed;
            for to in rotated {
                history.rotated_total += 1;
                history.rotations.push_back((at, to));
                if history.rotations.len() > ROTATIONS_KEPT {
                    history.rotations.pop_front();
                }
            }
        });
    }
}

impl Actor for LogRotationActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // As the kubelet's `wait.Forever`: a pass at once, then one every interval.
        self.start_pass(ctx);
        ctx.run_interval(self.settings.monitor_interval, |actor, ctx| {
            actor.start_pass(ctx);
        });
    }
}

impl SupervisedActor for LogRotationActor {
    fn debug_state(&self) -> serde_json::Value {
        let settings = self.settings;
        let history = self.history.get();
        json!({
            "maxSizeBytes": settings.max_size,
            "maxFiles": settings.max_files,
            "maxWorkers": settings.max_workers,
            "monitorIntervalSeconds": settings.monitor_interval.as_secs_f64(),
            "passes": self.passes,
            "passInProgress": self.pass_running,
            "rotatedTotal": history.rotated_total,
            "failedTotal": history.failed_total,
            "lastPassErrors": self.last_errors,
            "rotations": history.rotations.iter().map(|(at, to)| json!({
                "at": at.to_string(),
                "rotatedTo": to.display().to_string(),
            })).collect::<Vec<_>>(),
        })
    }
}
