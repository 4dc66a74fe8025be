//! ImageGcActor, the kubelet's image manager: every `period` (5m) it collects unused images
//! when the image filesystem is at or above `imageGCHighThresholdPercent`, least recently used
//! first, down to `imageGCLowThresholdPercent`; it records the kubelet's Node events
//! (`FreeDiskSpaceFailed`, `ImageGCFailed` on a repeated failure). It never removes an image a
//! container or pod uses, or a pinned one. The choice is the pure core's (`records`).

mod collector;
pub mod records;
#[cfg(test)]
mod tests;

use std::{collections::VecDeque, sync::Arc, time::Duration};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, WrapFuture};
use jiff::Timestamp;
use nodepulse_supervisor::{Kept, SupervisedActor};
use serde_json::json;
use tokio::time::Instant;

pub use collector::{Collection, GcError, ImageCollector, ImageGcSettings, Reason, Removed};

use crate::{
    clock::{self, WallClock},
    ports::{NodeApi, NodeEvent},
};

/// The name ImageGcActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "image-gc";

/// How many removed images the debug view lists.
const REMOVED_KEPT: usize = 50;

/// What outlives an instance: the consecutive failures (an `ImageGCFailed` needs two) and the
/// images removed lately.
#[derive(Debug, Clone, Default)]
pub struct GcHistory {
    consecutive_failures: u32,
    removed: VecDeque<(Timestamp, Removed)>,
    removed_total: u64,
    freed_total: u64,
}

/// The last collection, for the debug view.
#[derive(Debug, Clone)]
struct LastPass {
    at: Timestamp,
    took: Duration,
    collection: Collection,
    error: Option<String>,
}

pub struct ImageGcActor {
    collector: ImageCollector,
    node_api: Arc<dyn NodeApi>,
    node_name: String,
    history: Kept<GcHistory>,
    pass_started: Option<Instant>,
    passes: u64,
    last: Option<LastPass>,
    /// Wall time for the passes' records and events.
    wall_clock: WallClock,
}

impl ImageGcActor {
    /// `collector` and `history` outlive the instance: the factory hands every instance the
    /// same ones, so the bookkeeping survives a restart.
    pub fn new(
        collector: ImageCollector,
        node_api: Arc<dyn NodeApi>,
        node_name: String,
        history: Kept<GcHistory>,
    ) -> Self {
        Self {
            collector,
            node_api,
            node_name,
            history,
            pass_started: None,
            passes: 0,
            last: None,
            wall_clock: clock::system(),
        }
    }

    /// Reads wall time from `clock` instead of the system's.
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }

    fn start_pass(&mut self, ctx: &mut Context<Self>) {
        if self.pass_started.is_some() {
            return; // a slow collection is never stacked on
        }
        self.pass_started = Some(Instant::now());
        let collector = self.collector.clone();
        let pass = async move { collector.garbage_collect().await };
        ctx.spawn(
            pass.into_actor(self)
                .map(|(collection, result), actor, _| actor.finish_pass(collection, result)),
        );
    }

    fn finish_pass(&mut self, collection: Collection, result: Result<(), GcError>) {
        let took = self
            .pass_started
            .take()
            .map_or(Duration::ZERO, |started| started.elapsed());
        self.passes += 1;
        let at = (self.wall_clock)();
        let mut events = Vec::new();
        if let Err(GcError::Insufficient(message)) = &result {
            events.push(NodeEvent::warning("FreeDiskSpaceFailed", message.clone()));
        }
        self.history.update(|history| {
            for removed in &collection.removed {
                history.removed_total += 1;
                history.freed_total = history.freed_total.saturating_add(removed.size_bytes);
                history.removed.push_back((at, removed.clone()));
                if history.removed.len() > REMOVED_KEPT {
                    history.removed.pop_front();
                }
            }
            match &result {
                Ok(()) => history.consecutive_failures = 0,
                Err(error) => {
                    history.consecutive_failures += 1;
                    if history.consecutive_failures == 1 {
                        tracing::warn!(%error, "Image garbage collection failed once. Stats initialization may not have completed yet");
                    } else {
                        tracing::error!(%error, "Image garbage collection failed multiple times in a row");
                        events.push(NodeEvent::warning("ImageGCFailed", error.to_string()));
                    }
                }
            }
        });
        for event in events {
            let recording = self.node_api.record_event(&self.node_name, event);
            // Events are best effort, as the kubelet's recorder: a lost one is only logged.
            actix::spawn(async move {
                if let Err(error) = recording.await {
                    tracing::debug!(%error, "an image GC event was not recorded");
                }
            });
        }
        self.last = Some(LastPass {
            at,
            took,
            collection,
            error: result.err().map(|error| error.to_string()),
        });
    }
}

impl Actor for ImageGcActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if self.collector.settings.disabled() {
            tracing::info!(
                "ImageGCHighThresholdPercent is set 100 and ImageMaximumGCAge is 0, Disable image GC"
            );
            return;
        }
        self.start_pass(ctx);
        ctx.run_interval(self.collector.settings.period, |actor, ctx| {
            actor.start_pass(ctx);
        });
    }
}

impl SupervisedActor for ImageGcActor {
    fn debug_state(&self) -> serde_json::Value {
        let settings = self.collector.settings;
        let now = Instant::now();
        let ago = |instant: Instant| now.saturating_duration_since(instant).as_secs_f64();
        let images: Vec<_> = self
            .collector
            .records()
            .iter()
            .map(|(id, record)| {
                json!({
                    "id": id,
                    "name": record.name,
                    "sizeBytes": record.size_bytes,
                    "pinned": record.pinned,
                    "inUse": record.in_use,
                    "firstDetectedSecondsAgo": ago(record.first_detected),
                    "lastUsedSecondsAgo": record.last_used.map(ago),
                })
            })
            .collect();
        let history = self.history.get();
        json!({
            "disabled": settings.disabled(),
            "highThresholdPercent": settings.high_threshold_percent,
            "lowThresholdPercent": settings.low_threshold_percent,
            "minimumAgeSeconds": settings.minimum_age.as_secs_f64(),
            "maximumAgeSeconds": settings.maximum_age.as_secs_f64(),
            "periodSeconds": settings.period.as_secs_f64(),
            "passes": self.passes,
            "passInProgressSeconds": self.pass_started.map(ago),
            "consecutiveFailures": history.consecutive_failures,
            "removedTotal": history.removed_total,
            "freedBytesTotal": history.freed_total,
            "lastPass": self.last.as_ref().map(|last| json!({
                "at": last.at.to_string(),
                "tookSeconds": last.took.as_secs_f64(),
                "usagePercent": last.collection.need.map(|need| need.usage_percent),
                "bytesToFree": last.collection.need.map(|need| need.bytes_to_free),
                "freedBytes": last.collection.freed_bytes,
                "error": last.error,
            })),
            "removed": history.removed.iter().map(|(at, removed)| json!({
                "at": at.to_string(),
                "id": removed.id,
                "name": removed.name,
                "sizeBytes": removed.size_bytes,
                "reason": removed.reason,
            })).collect::<Vec<_>>(),
            "images": images,
        })
    }
}
