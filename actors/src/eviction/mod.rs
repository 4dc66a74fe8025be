//! EvictionSignalActor: every `housekeepingInterval` it measures the host (memory, nodefs,
//! imagefs, PIDs), compares with the eviction thresholds and tells NodeStatusActor the
//! pressure conditions at once. It owns the thresholds' first/last-observed times (kept across
//! its restarts). When a threshold is eligible (hard, or soft past its grace period) it ranks the
//! active pods and asks StatusManager to evict at most one per pass (`EvictPod`); for a disk
//! signal that images can relieve it first has unused images deleted, measures again and
//! evicts only if a threshold is still met. Before any threshold, a pod above its own
//! local-storage limits (emptyDir `sizeLimit`, `ephemeral-storage`) is evicted (`local_storage`).

mod local_storage;
#[cfg(test)]
mod local_storage_tests;
mod observe;
mod pressure;
pub mod ranking;
#[cfg(test)]
mod ranking_tests;
mod reclaim;
#[cfg(test)]
mod reclaim_tests;
mod signals;
mod storage_cache;
#[cfg(test)]
mod tests;
mod thresholds;

use std::{collections::BTreeSet, path::PathBuf, sync::Arc, time::Duration};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, WrapFuture};
use jiff::Timestamp;
use nodepulse_supervisor::{Kept, Recipient, SendError, SupervisedActor};
use serde_json::json;
use tokio::time::Instant;

pub use local_storage::local_storage_evictions;
pub use observe::{dedicated_image_fs, observations};
pub use pressure::{PassOutcome, PressureState, housekeeping_pass};
pub use ranking::Resource;
pub use signals::{Condition, Observation, Observations, Signal};
pub use storage_cache::{PodStorageCache, WithStorage};
pub use thresholds::{
    Threshold, ThresholdConfig, ThresholdError, ThresholdValue, default_eviction_hard,
    parse_thresholds,
};

use crate::{
    clock::{self, WallClock},
    image_gc::ImageCollector,
    messages::{EvictPod, PressureChanged, SignalObservation},
    ports::{HostObservation, HostSignals, PodStatsSource, RuntimeService},
};

/// The name EvictionSignalActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "eviction-signal";

/// What the EvictionSignalActor is configured with.
#[derive(Debug, Clone)]
pub struct EvictionSettings {
    pub thresholds: Vec<Threshold>,
    /// `housekeepingInterval` (10 s).
    pub housekeeping_interval: Duration,
    /// `evictionPressureTransitionPeriod` (5 m).
    pub pressure_transition_period: Duration,
    /// Bound on the `ImageFsInfo` call.
    pub runtime_request_timeout: Duration,
}

/// The last pass, for the debug view.
#[derive(Debug, Clone)]
struct LastPass {
    at: Timestamp,
    took: Duration,
    observations: Observations,
    outcome: PassOutcome,
    errors: Vec<String>,
    dedicated_image_fs: bool,
}

pub struct EvictionSignalActor {
    settings: EvictionSettings,
    host: Arc<dyn HostSignals>,
    /// Asked for the image filesystem; `None` for a simulated runtime.
    runtime: Option<Arc<dyn RuntimeService>>,
    pressure: Recipient<PressureChanged>,
    state: Kept<PressureState>,
    /// The runtime's image filesystem as last answered by `ImageFsInfo`.
    image_fs: Option<PathBuf>,
    pass_started: Option<Instant>,
    passes: u64,
    last: Option<LastPass>,
    /// The active pods and where evictions go; `None`: this node evicts nothing.
    evictions: Option<Evictions>,
    evicted: EvictionRecord,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
    /// Deletes unused images before a disk eviction; `None`: straight to the eviction.
    images: Option<ImageCollector>,
    /// Since when a reclaim runs (no pass starts meanwhile).
    reclaim_started: Option<Instant>,
    reclaims: ReclaimRecord,
}

/// The reclaims run, for the debug view.
#[derive(Debug, Clone, Default)]
struct ReclaimRecord {
    count: u64,
    /// How many of them relieved every threshold, so no pod was evicted.
    sufficed: u64,
    last: Option<(Timestamp, u64, Option<String>)>,
}

/// Where pods to evict come from and where their eviction goes.
#[derive(Clone)]
pub struct Evictions {
    pub pods: Arc<dyn PodStatsSource>,
    pub evict: Recipient<EvictPod>,
}

/// The last eviction asked for, for the debug view.
#[derive(Debug, Clone, Default)]
struct EvictionRecord {
    count: u64,
    last: Option<(Timestamp, String, String)>,
}

impl EvictionSignalActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl EvictionSignalActor {
    /// `state` outlives the instance: the factory hands every instance the same one.
    pub fn new(
        settings: EvictionSettings,
        host: Arc<dyn HostSignals>,
        runtime: Option<Arc<dyn RuntimeService>>,
        pressure: Recipient<PressureChanged>,
        state: Kept<PressureState>,
    ) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            host,
            runtime,
            pressure,
            state,
            image_fs: None,
            pass_started: None,
            passes: 0,
            last: None,
            evictions: None,
            evicted: EvictionRecord::default(),
            images: None,
            reclaim_started: None,
            reclaims: ReclaimRecord::default(),
        }
    }

    /// Deletes unused images through `images` before evicting for a disk signal.
    #[must_use]
    pub fn with_image_reclaim(mut self, images: ImageCollector) -> Self {
        self.images = Some(images);
        self
    }

    /// Evicts from `evictions.pods` when a threshold is eligible.
    #[must_use]
    pub fn with_evictions(mut self, evictions: Evictions) -> Self {
        self.evictions = Some(evictions);
        self
    }

    /// Step 9–12 of the pass: the eligible threshold to reclaim; unused images first when
    /// they can relieve it, else at most one pod.
    fn evict(
        &mut self,
        ctx: &mut Context<Self>,
        observed: &Observations,
        outcome: &PassOutcome,
        dedicated_image_fs: bool,
    ) {
        if self.evictions.is_none() {
            return;
        }
        let Some(threshold) = ranking::threshold_to_reclaim(
            &self.settings.thresholds,
            outcome.eligible.iter().copied(),
        ) else {
            return;
        };
        if let Some(images) = self.images.clone()
            && reclaim::images_relieve(threshold.signal, dedicated_image_fs)
        {
            self.reclaim(ctx, images, outcome.met.clone());
            return;
        }
        self.evict_for(threshold.clone(), observed);
    }

    /// Deletes unused images, measures again, and evicts only if one of `met` is still met.
    fn reclaim(&mut self, ctx: &mut Context<Self>, images: ImageCollector, met: BTreeSet<usize>) {
        self.reclaim_started = Some(Instant::now());
        let host = Arc::clone(&self.host);
        let image_fs = self.image_fs.clone();
        let work = async move {
            let (collection, result) = images.delete_unused_images().await;
            let measured = host.observe(image_fs).await;
            (collection, result, measured)
        };
        ctx.spawn(work.into_actor(self).map(move |(collection, result, measured), actor, _| {
            actor.reclaim_started = None;
            let error = result.err().map(|error| error.to_string());
            if let Some(error) = &error {
                tracing::warn!(%error, "Eviction manager: unexpected error when attempting to reduce resource pressure");
            }
            let (observed, _) = observations(&measured);
            let still = reclaim::still_met(&actor.settings.thresholds, &met, &observed);
            actor.reclaims.count += 1;
            actor.reclaims.last = Some(((actor.wall_clock)(), collection.freed_bytes, error));
            let threshold = ranking::threshold_to_reclaim(&actor.settings.thresholds, still)
                .cloned();
            match threshold {
                None => {
                    actor.reclaims.sufficed += 1;
                    tracing::info!(freed = collection.freed_bytes, "Eviction manager: able to reduce resource pressure without evicting pods.");
                }
                Some(threshold) => {
                    tracing::info!(freed = collection.freed_bytes, "Eviction manager: must evict pod(s) to reclaim");
                    actor.evict_for(threshold, &observed);
                }
            }
        }));
    }

    /// Step 8 of the pass: every pod above its own local-storage limits; `true` if any.
    fn evict_local_storage(&mut self, dedicated_image_fs: bool) -> bool {
        let Some(evictions) = self.evictions.as_ref() else {
            return false;
        };
        let chosen = local_storage_evictions(&evictions.pods.active_pods(), dedicated_image_fs);
        let any = !chosen.is_empty();
        for eviction in chosen {
            let pod = eviction.pod.metadata.name.clone().unwrap_or_default();
            tracing::warn!(%pod, message = %eviction.message, "evicting a pod above its local storage limit");
            let record = ((self.wall_clock)(), pod, "local-storage".to_owned());
            match evictions.evict.try_send(eviction) {
                Ok(()) => {
                    self.evicted.count += 1;
                    self.evicted.last = Some(record);
                }
                // The pod stays active, so the next pass chooses it again.
                Err(error) => tracing::warn!(%error, "the eviction was not delivered"),
            }
        }
        any
    }

    fn evict_for(&mut self, threshold: Threshold, observed: &Observations) {
        let Some(evictions) = self.evictions.as_ref() else {
            return;
        };
        let threshold = &threshold;
        let Some(eviction) =
            ranking::choose_eviction(threshold, observed, evictions.pods.active_pods())
        else {
            tracing::debug!(signal = %threshold.signal, "a threshold is met but no pod may be evicted");
            return;
        };
        let pod = eviction.pod.metadata.name.clone().unwrap_or_default();
        tracing::warn!(%pod, signal = %threshold.signal, "eviction threshold met; evicting one pod");
        let record = ((self.wall_clock)(), pod, threshold.signal.name().to_owned());
        match evictions.evict.try_send(eviction) {
            Ok(()) => {
                let signal = [threshold.signal.name()];
                crate::kubelet_metrics::KUBELET_METRICS
                    .evictions
                    .inc(&signal);
                self.evicted.count += 1;
                self.evicted.last = Some(record);
            }
            // The pod stays active, so the next pass chooses it again.
            Err(error) => tracing::warn!(%error, "the eviction was not delivered"),
        }
    }

    fn start_pass(&mut self, ctx: &mut Context<Self>) {
        if self.pass_started.is_some() || self.reclaim_started.is_some() {
            return; // a slow pass is never stacked on; the next tick finds it finished
        }
        self.pass_started = Some(Instant::now());
        let host = Arc::clone(&self.host);
        let runtime = self.runtime.clone();
        let known = self.image_fs.clone();
        // A hung runtime must not hold the memory and PID signals back: ImageFsInfo gets at
        // most half an interval, and the last known image filesystem stands in meanwhile.
        let timeout = self
            .settings
            .runtime_request_timeout
            .min(self.settings.housekeeping_interval / 2);
        let measure = async move {
            let image_fs = match runtime {
                Some(runtime) => match tokio::time::timeout(timeout, runtime.image_fs_info()).await
                {
                    Ok(Ok(filesystems)) => filesystems
                        .into_iter()
                        .next()
                        .map(|fs| fs.mountpoint)
                        .or(known),
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "ImageFsInfo failed; the last known image fs is used");
                        known
                    }
                    Err(_) => known,
                },
                None => None,
            };
            let observation = host.observe(image_fs.clone()).await;
            (image_fs, observation)
        };
        // Spawned, not awaited: the mailbox and liveness pings stay served while the host is read.
        ctx.spawn(
            measure
                .into_actor(self)
                .map(|(image_fs, host), actor, ctx| {
                    actor.image_fs = image_fs;
                    actor.finish_pass(ctx, &host);
                }),
        );
    }

    fn finish_pass(&mut self, ctx: &mut Context<Self>, host: &HostObservation) {
        let took = self
            .pass_started
            .take()
            .map_or(Duration::ZERO, |started| started.elapsed());
        self.passes += 1;
        let (observed, errors) = observations(host);
        for error in &errors {
            tracing::warn!(%error, "a host signal could not be read this pass");
        }
        let now = Instant::now();
        let outcome = housekeeping_pass(
            &self.settings.thresholds,
            &observed,
            &mut self.state.lock(),
            self.settings.pressure_transition_period,
            now,
        );
        let previous = self
            .last
            .as_ref()
            .map(|last| last.outcome.conditions.clone());
        if previous.as_ref() != Some(&outcome.conditions) {
            tracing::info!(conditions = ?outcome.conditions, "pressure conditions changed");
        }
        // As the kubelet: a pass that evicts for local storage evicts for nothing else.
        if !self.evict_local_storage(dedicated_image_fs(host)) {
            self.evict(ctx, &observed, &outcome, dedicated_image_fs(host));
        }
        let at = (self.wall_clock)();
        let message = self.message(&observed, &outcome, at);
        if let Err(error) = self.pressure.try_send(message) {
            // The next pass sends the whole picture again, so nothing is lost for good.
            let reason = match error {
                SendError::Full(_) => "full",
                SendError::Closed(_) => "closed",
            };
            tracing::warn!(
                reason,
                "PressureChanged not delivered; the next pass sends it again"
            );
        }
        self.last = Some(LastPass {
            at,
            took,
            observations: observed,
            outcome,
            errors,
            dedicated_image_fs: dedicated_image_fs(host),
        });
    }

    fn message(
        &self,
        observed: &Observations,
        outcome: &PassOutcome,
        at: Timestamp,
    ) -> PressureChanged {
        let first_observed = self.state.read(|state| state.first_observed.clone());
        let now = Instant::now();
        let met_since = |signal: Signal| {
            let first = self
                .settings
                .thresholds
                .iter()
                .enumerate()
                .filter(|(_, threshold)| threshold.signal == signal)
                .filter_map(|(index, _)| first_observed.get(&index).copied())
                .min()?;
            let ago = jiff::SignedDuration::try_from(now.saturating_duration_since(first)).ok()?;
            at.checked_sub(ago).ok()
        };
        let signals = observed
            .iter()
            .map(|(signal, observation)| SignalObservation {
                signal: signal.name().to_owned(),
                available: observation.available,
                capacity: observation.capacity,
                threshold: self.threshold_text(*signal),
                observed_at: at,
                threshold_met_since: met_since(*signal),
            })
            .collect();
        PressureChanged {
            memory_pressure: outcome.has(Condition::MemoryPressure),
            disk_pressure: outcome.has(Condition::DiskPressure),
            pid_pressure: outcome.has(Condition::PidPressure),
            signals,
        }
    }

    /// The thresholds of `signal` as configured: `100Mi`, or `100Mi, soft 200Mi` when both.
    fn threshold_text(&self, signal: Signal) -> Option<String> {
        let texts: Vec<String> = self
            .settings
            .thresholds
            .iter()
            .filter(|threshold| threshold.signal == signal)
            .map(|threshold| {
                if threshold.hard {
                    threshold.text.clone()
                } else {
                    format!("soft {}", threshold.text)
                }
            })
            .collect();
        (!texts.is_empty()).then(|| texts.join(", "))
    }
}

impl Actor for EvictionSignalActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.start_pass(ctx);
        ctx.run_interval(self.settings.housekeeping_interval, |actor, ctx| {
            actor.start_pass(ctx);
        });
    }
}

impl SupervisedActor for EvictionSignalActor {
    fn debug_state(&self) -> serde_json::Value {
        let state = self.state.get();
        let now = Instant::now();
        let since = |instant: Instant| now.saturating_duration_since(instant).as_secs_f64();
        let signals: Vec<_> = Signal::ALL
            .into_iter()
            .map(|signal| {
                let observation = self.last.as_ref().and_then(|last| last.observations.get(&signal));
                let thresholds: Vec<_> = self
                    .settings
                    .thresholds
                    .iter()
                    .enumerate()
                    .filter(|(_, threshold)| threshold.signal == signal)
                    .map(|(index, threshold)| json!({
                        "value": threshold.text,
                        "hard": threshold.hard,
                        "gracePeriodSeconds": threshold.grace_period.as_secs_f64(),
                        "met": self.last.as_ref().is_some_and(|last| last.outcome.met.contains(&index)),
                        "firstObservedSecondsAgo": state.first_observed.get(&index).map(|first| since(*first)),
                    }))
                    .collect();
                json!({
                    "signal": signal.name(),
                    "available": observation.map(|observation| observation.available),
                    "capacity": observation.map(|observation| observation.capacity),
                    "thresholds": thresholds,
                })
            })
            .collect();
        json!({
            "passes": self.passes,
            "imageFs": self.image_fs,
            "passInProgressSeconds": self.pass_started.map(|started| started.elapsed().as_secs_f64()),
            "lastPass": self.last.as_ref().map(|last| json!({
                "at": last.at.to_string(),
                "tookSeconds": last.took.as_secs_f64(),
                "errors": last.errors,
                "dedicatedImageFs": last.dedicated_image_fs,
            })),
            "memoryPressure": self.last.as_ref().is_some_and(|last| last.outcome.has(Condition::MemoryPressure)),
            "diskPressure": self.last.as_ref().is_some_and(|last| last.outcome.has(Condition::DiskPressure)),
            "pidPressure": self.last.as_ref().is_some_and(|last| last.outcome.has(Condition::PidPressure)),
            "conditionsLastObservedSecondsAgo": state.last_observed.iter()
                .map(|(condition, last)| (format!("{condition:?}"), since(*last)))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "signals": signals,
            "evictions": self.evicted.count,
            "imageReclaims": self.reclaims.count,
            "imageReclaimsSufficed": self.reclaims.sufficed,
            "lastImageReclaim": self.reclaims.last.as_ref().map(|(at, freed, error)| json!({
                "at": at.to_string(), "freedBytes": freed, "error": error,
            })),
            "lastEviction": self.evicted.last.as_ref().map(|(at, pod, signal)| json!({
                "at": at.to_string(), "pod": pod, "signal": signal,
            })),
        })
    }
}
