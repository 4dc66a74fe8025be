//! StatusManagerActor: the only writer of pod statuses. Its entry points (SetPodStatus,
//! SetContainerReadiness, TerminatePod) update the versioned cache, which lives in a store the
//! factory hands to every instance, so a status accepted once is never lost to a crash. A
//! change starts that pod's sync at once; every `sync_period` while it knows a pod, a batch
//! pass resends every version the API lacks, reconciles a status the API shows differently
//! (edited behind nodepulse's back, as the pod watch reports it) and retries the deletion of
//! finished pods (with no pod there is nothing to pass over, and the actor sleeps).
//! A new instance takes the store over (its generation), sends what is unsent, and fences off
//! an older, hung one. An eviction is recorded as a Warning event and handed to the provider,
//! which stops the pod and reports its final status.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, SpawnHandle, StreamHandler, WrapFuture,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use nodepulse_supervisor::{Kept, Recipient, SupervisedActor};
use serde_json::json;

use super::{
    cache::{PodStatusCache, UpdateOutcome},
    generation::with_observed_generation,
    merge::merge_pod_status,
    patch::pod_status_patch,
    readiness::with_container_readiness,
    sync::{PodSyncJob, PodSyncOutcome, could_have_running_containers, sync_pod},
    terminate::terminated_status,
};
use crate::{
    clock::{self, WallClock},
    config_source::{is_static_pod, mirror_hash},
    kept_pod::KeptPod,
    messages::{
        EvictPod, FlushPodStatuses, PodGone, PodObserved, SetContainerReadiness, SetPodStatus,
        StopPod, TerminatePod,
    },
    ports::{ApiRecovered, PodApi, PodEvent, warn_unless_unreachable},
    shrink::{map_after_removal, set_after_removal},
};

/// How StatusManagerActor is configured.
#[derive(Debug, Clone)]
pub struct StatusManagerSettings {
    pub node_name: String,
    /// The batch pass period (the kubelet's 10 s `syncPeriod`).
    pub sync_period: Duration,
    /// Pod syncs in flight at once; the rest wait for a free slot.
    pub max_in_flight: usize,
}

impl StatusManagerSettings {
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            sync_period: Duration::from_secs(10),
            max_in_flight: 16,
        }
    }
}

/// What outlives an instance (handed to every generation in a [`Kept`]): the versioned
/// cache, the pods it was told about (by UID), and which instance is in charge. Pods are the
/// watch's and the provider's `Arc`s, never copies of their own.
#[derive(Debug, Default)]
pub struct PodStatusStore {
    cache: PodStatusCache,
    pods: HashMap<String, KeptPod>,
    /// Each pod (by UID) as the pod watch last reported it: its status is the API's.
    api_seen: HashMap<String, KeptPod>,
    generation: u64,
    /// Batch passes run so far, by every instance.
    batch_passes: u64,
}

impl PodStatusStore {
    /// `needsReconcile`: the API's status, merged with the cached one, is not what the API
    /// has — someone else changed what the kubelet owns. Only for versions already sent: an
    /// unsent one is on its way anyway.
    /// A version found to agree with the API's pod is not compared again until either changes.
    fn needs_reconcile(&mut self, uid: &str, now: Timestamp) -> bool {
        let (Some(entry), Some(seen)) = (self.cache.get(uid), self.api_seen.get(uid)) else {
            return false;
        };
        if self.cache.unsent(uid) || self.cache.agrees_with(uid, seen) {
            return false;
        }
        let seen = seen.clone();
        let api_pod = seen.pod();
        let none = PodStatus::default();
        let api = api_pod.status.as_ref().unwrap_or(&none);
        let cached = entry.status.get();
        let merged = merge_pod_status(api, &cached, could_have_running_containers(&cached), now);
        let differs = pod_status_patch(uid, api, &merged).is_some();
        if !differs {
            self.cache.agreed(uid, &seen);
        }
        differs
    }

    /// Forgets the pod with this UID: its status, its pod, the API's view of it, and the
    /// table space they held once most pods are gone.
    fn forget(&mut self, uid: &str) {
        self.cache.remove(uid);
        self.pods.remove(uid);
        self.api_seen.remove(uid);
        map_after_removal(&mut self.pods);
        map_after_removal(&mut self.api_seen);
    }
}

impl PodStatusStore {
    /// How many periodic batch passes have run.
    pub fn batch_passes(&self) -> u64 {
        self.batch_passes
    }

    /// The cache, for tests and the debug view.
    pub fn cache(&self) -> &PodStatusCache {
        &self.cache
    }

    /// Entries and table slots the store holds for pods: zero of each once every pod it knew
    /// is gone (a deleted pod leaves nothing behind).
    pub fn footprint(&self) -> (usize, usize) {
        let (entries, slots) = self.cache.footprint();
        (
            entries + self.pods.len() + self.api_seen.len(),
            slots + self.pods.capacity() + self.api_seen.capacity(),
        )
    }

    /// Makes the caller the instance in charge; returns its generation.
    fn take_over(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    fn is_current(&self, generation: u64) -> bool {
        self.generation == generation
    }
}

/// Counters for the debug view.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    patches: u64,
    skipped: u64,
    deleted: u64,
    recreated: u64,
    failures: u64,
    rejected: u64,
    reconciled: u64,
    evictions: u64,
}

pub struct StatusManagerActor {
    settings: StatusManagerSettings,
    api: Arc<dyn PodApi>,
    store: Kept<PodStatusStore>,
    /// Where an eviction's "stop this pod" goes: the pod lifecycle provider.
    provider: Option<Recipient<StopPod>>,
    generation: u64,
    in_flight: HashSet<String>,
    /// Pods whose last sync failed: retried by the next batch pass or their next change, not
    /// at once (a failing API would otherwise be hammered in a loop).
    failed: HashSet<String>,
    counters: Counters,
    last_error: Option<(Timestamp, String)>,
    /// Flush requests waiting for every unsent status to have been tried.
    flushes: Vec<tokio::sync::oneshot::Sender<usize>>,
    /// The batch pass's timer, set while the store knows a pod.
    batch_timer: Option<SpawnHandle>,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
}

impl StatusManagerActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl StatusManagerActor {
    pub fn new(
        settings: StatusManagerSettings,
        api: Arc<dyn PodApi>,
        store: Kept<PodStatusStore>,
    ) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            api,
            store,
            provider: None,
            generation: 0,
            in_flight: HashSet::new(),
            failed: HashSet::new(),
            counters: Counters::default(),
            last_error: None,
            flushes: Vec::new(),
            batch_timer: None,
        }
    }

    /// Evictions are handed to `provider`, which stops the pod.
    #[must_use]
    pub fn with_provider(mut self, provider: Recipient<StopPod>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The internal update every entry point ends in; a stored change is synced at once.
    /// `status` makes the status from the pod (decoded once, here).
    fn update(
        &mut self,
        ctx: &mut Context<Self>,
        kept: &KeptPod,
        status: impl FnOnce(&Pod) -> PodStatus,
        force: bool,
        finished: bool,
    ) {
        let pod = kept.pod();
        let status = status(&pod);
        let Some(uid) = pod.metadata.uid.clone() else {
            tracing::warn!(pod = ?pod.metadata.name, "a pod without a UID has no status to sync");
            return;
        };
        let outcome = {
            let mut stored = self.store.lock();
            // A pod being deleted that this manager has forgotten (its watch said gone, or the
            // final delete went through) has nothing left to write to: its provider's last
            // words while it cleans up would otherwise bring the entry back, and the batch
            // pass would ask the API for it every period for ever (the node authorizer's 403).
            let known = stored.api_seen.contains_key(&uid) || stored.pods.contains_key(&uid);
            if pod.metadata.deletion_timestamp.is_some() && !known {
                tracing::debug!(%uid, "a status for a deleted pod the API no longer shows; dropped");
                return;
            }
            stored.pods.insert(uid.clone(), kept.clone());
            crate::kubelet_metrics::pod_phase(&uid, status.phase.as_deref());
            stored
                .cache
                .update(&pod, status, force, finished, (self.wall_clock)())
        };
        self.arm_batch(ctx);
        match outcome {
            UpdateOutcome::Stored { .. } => {
                self.failed.remove(&uid);
                self.start(ctx, &uid);
            }
            UpdateOutcome::Unchanged => {}
            UpdateOutcome::Rejected(reason) => {
                self.counters.rejected += 1;
                tracing::warn!(%uid, %reason, "pod status update rejected");
            }
        }
    }

    /// Starts the sync of `uid` unless it is already running (then its end starts it again)
    /// or every slot is taken (then a slot freeing up picks it).
    fn start(&mut self, ctx: &mut Context<Self>, uid: &str) {
        if self.in_flight.contains(uid) || self.in_flight.len() >= self.settings.max_in_flight {
            return;
        }
        let job = self.store.read(|stored| {
            stored.cache.get(uid).map(|entry| PodSyncJob {
                uid: uid.to_owned(),
                namespace: entry.namespace.clone(),
                name: entry.name.clone(),
                version: entry.version,
                finished: entry.finished,
                status: entry.status.clone(),
                static_pod: stored
                    .pods
                    .get(uid)
                    .is_some_and(|pod| is_static_pod(&pod.pod())),
            })
        });
        let Some(job) = job else {
            return;
        };
        self.in_flight.insert(uid.to_owned());
        let (store, generation) = (self.store.clone(), self.generation);
        let sync = sync_pod(
            Arc::clone(&self.api),
            job,
            move || store.read(|store| store.is_current(generation)),
            (self.wall_clock)(),
        );
        let uid = uid.to_owned();
        // Spawned, not awaited: the mailbox and liveness pings stay served while it runs.
        ctx.spawn(sync.into_actor(self).map(move |outcome, actor, ctx| {
            actor.in_flight.remove(&uid);
            set_after_removal(&mut actor.in_flight);
            actor.finish(&uid, outcome);
            actor.start_unsent(ctx);
            actor.answer_flushes();
        }));
    }

    fn finish(&mut self, uid: &str, outcome: PodSyncOutcome) {
        if !self.store.read(|store| store.is_current(self.generation)) {
            return;
        }
        let mut stored = self.store.lock();
        match outcome {
            PodSyncOutcome::Synced {
                version,
                patched,
                deleted,
            } => {
                stored.cache.mark_sent(uid, version);
                if patched {
                    self.counters.patches += 1;
                } else {
                    self.counters.skipped += 1;
                }
                if deleted {
                    self.counters.deleted += 1;
                    stored.forget(uid);
                }
            }
            PodSyncOutcome::NotFound => {
                // Nothing to write to; a pod that comes back has a new UID.
                stored.forget(uid);
            }
            PodSyncOutcome::Recreated { api_uid } => {
                self.counters.recreated += 1;
                tracing::info!(%uid, %api_uid, "the pod was re-created; its old status is dropped");
                stored.forget(uid);
            }
            PodSyncOutcome::NoMirror => {
                // The mirror pod's creation (or the next batch pass) brings it back.
                self.failed.insert(uid.to_owned());
                tracing::debug!(%uid, "Static pod does not have a corresponding mirror pod; skipping");
            }
            PodSyncOutcome::Superseded => {}
            PodSyncOutcome::Failed(error) => {
                self.failed.insert(uid.to_owned());
                self.counters.failures += 1;
                warn_unless_unreachable!(self.api.recovery(), %uid, %error, retryable = error.is_retryable(), "pod status sync failed; the batch pass retries");
                self.last_error = Some(((self.wall_clock)(), error.to_string()));
            }
        }
    }

    /// Sets the batch pass's timer when the store knows a pod and it is not set yet; the pass
    /// clears it once the store is empty again.
    fn arm_batch(&mut self, ctx: &mut Context<Self>) {
        if self.batch_timer.is_none() && self.store.read(|store| !store.pods.is_empty()) {
            let timer = ctx.run_interval(self.settings.sync_period, |actor, ctx| actor.batch(ctx));
            self.batch_timer = Some(timer);
        }
    }

    /// `syncBatch(all=false)`: every pod whose cached version the API lacks.
    fn start_unsent(&mut self, ctx: &mut Context<Self>) {
        let mut unsent = self.store.lock().cache.unsent_pods();
        unsent.retain(|uid| !self.failed.contains(uid));
        for uid in &unsent {
            if self.in_flight.len() >= self.settings.max_in_flight {
                break;
            }
            self.start(ctx, uid);
        }
    }

    /// Answers the waiting flushes once no sync runs: every unsent status not failed has been
    /// started (a sync's end starts the next), so what is still unsent was refused.
    fn answer_flushes(&mut self) {
        if self.flushes.is_empty() || !self.in_flight.is_empty() {
            return;
        }
        let unsent = self.store.lock().cache.unsent_pods().len();
        for flush in self.flushes.drain(..) {
            let _ = flush.send(unsent);
        }
    }

    /// The periodic pass (`syncBatch(all=true)`): what is unsent; what the API shows
    /// differently from the cache (reconciled: the pod is synced again, which PATCHes only the
    /// kubelet's part back); and finished pods being deleted whose final delete has not
    /// happened yet (it failed, or the API's phase was not terminal yet). Pods whose API status
    /// matches cost nothing here: the comparison is local.
    fn batch(&mut self, ctx: &mut Context<Self>) {
        self.store.update(|store| store.batch_passes += 1);
        self.failed.clear();
        self.start_unsent(ctx);
        let now = (self.wall_clock)();
        let (finished, differing): (Vec<String>, Vec<String>) = {
            let stored = self.store.lock();
            let mut stored = stored;
            let finished = stored
                .pods
                .iter()
                .filter(|(uid, pod)| {
                    pod.is_deleting() && stored.cache.get(uid).is_some_and(|entry| entry.finished)
                })
                .map(|(uid, _)| uid.clone())
                .collect();
            let seen: Vec<String> = stored.api_seen.keys().cloned().collect();
            let differing = seen
                .into_iter()
                .filter(|uid| stored.needs_reconcile(uid, now))
                .collect();
            (finished, differing)
        };
        for uid in differing {
            if !self.in_flight.contains(&uid) {
                self.counters.reconciled += 1;
                tracing::info!(%uid, "the API's pod status differs from the cache; reconciling");
            }
            self.start(ctx, &uid);
        }
        for uid in finished {
            self.start(ctx, &uid);
        }
        if self.store.read(|store| store.pods.is_empty())
            && let Some(timer) = self.batch_timer.take()
        {
            ctx.cancel_future(timer);
        }
    }
}

impl Actor for StatusManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.generation = self.store.update(PodStatusStore::take_over);
        // A restarted instance first sends whatever its predecessor had not.
        self.start_unsent(ctx);
        self.arm_batch(ctx);
        ctx.add_stream(self.api.recovery().stream());
    }
}

/// Statuses whose writes failed during an outage wait for the next batch pass; the API
/// server's return sends them at once.
impl StreamHandler<ApiRecovered> for StatusManagerActor {
    fn handle(&mut self, _: ApiRecovered, ctx: &mut Context<Self>) {
        self.failed.clear();
        self.start_unsent(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

impl Handler<SetPodStatus> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: SetPodStatus, ctx: &mut Context<Self>) {
        let force = message.pod.is_deleting();
        let status = message.status;
        // The status observed the generation of the pod it was made from.
        let made = |pod: &Pod| with_observed_generation(pod, status);
        self.update(ctx, &message.pod, made, force, false);
    }
}

impl Handler<SetContainerReadiness> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: SetContainerReadiness, ctx: &mut Context<Self>) {
        let found = {
            let stored = self.store.lock();
            stored.pods.get(&message.pod_uid).and_then(|pod| {
                let cached = stored.cache.get(&message.pod_uid)?;
                let status = cached.status.get();
                with_container_readiness(&pod.pod(), &status, &message.container_id, message.ready)
                    .map(|status| (pod.clone(), status))
            })
        };
        if let Some((pod, status)) = found {
            self.update(ctx, &pod, |_| status, false, false);
        }
    }
}

impl Handler<TerminatePod> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: TerminatePod, ctx: &mut Context<Self>) {
        let kept = message.pod;
        let pod = kept.pod();
        let base = pod
            .metadata
            .uid
            .as_ref()
            .and_then(|uid| {
                self.store
                    .lock()
                    .cache
                    .get(uid)
                    .map(|c| PodStatus::clone(&c.status.get()))
            })
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let status = terminated_status(&pod, &base);
        self.update(ctx, &kept, |_| status, true, true);
    }
}

impl Handler<PodObserved> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: PodObserved, _: &mut Context<Self>) {
        let kept = message.pod;
        let Some(uid) = kept.uid().map(str::to_owned) else {
            return;
        };
        let pod = kept.pod();
        let mut stored = self.store.lock();
        // A static pod's status in the API is its mirror pod's (`TranslatePodUID`): a mirror
        // pod is seen for its static pod, and tells nothing else.
        if let Some(static_uid) = mirror_hash(&pod) {
            stored.api_seen.insert(static_uid.to_owned(), kept);
            return;
        }
        if !is_static_pod(&pod) {
            stored.api_seen.insert(uid.clone(), kept.clone());
            stored.cache.observed(&uid, &kept);
        }
        let pod = kept;
        // A pod already known keeps its latest metadata (a deletionTimestamp matters for the
        // final delete); one never told about stays unknown until its provider speaks.
        if let Some(known) = stored.pods.get_mut(&uid) {
            *known = pod;
        }
    }
}

impl Handler<PodGone> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: PodGone, _: &mut Context<Self>) {
        self.store.lock().forget(&message.uid);
        crate::kubelet_metrics::pod_forgotten(&message.uid);
        self.failed.remove(&message.uid);
        set_after_removal(&mut self.failed);
    }
}

impl Handler<FlushPodStatuses> for StatusManagerActor {
    type Result = actix::ResponseFuture<Option<usize>>;

    fn handle(&mut self, _: FlushPodStatuses, ctx: &mut Context<Self>) -> Self::Result {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.flushes.push(answer);
        // A shutdown is the last chance: statuses whose write failed are tried once more now.
        self.failed.clear();
        self.start_unsent(ctx);
        self.answer_flushes();
        // An instance that ends first (killed) never answers.
        Box::pin(async move { answered.await.ok() })
    }
}

impl Handler<EvictPod> for StatusManagerActor {
    type Result = ();

    fn handle(&mut self, message: EvictPod, ctx: &mut Context<Self>) {
        let pod = *message.pod;
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        self.counters.evictions += 1;
        tracing::warn!(pod = ?pod.metadata.name, %uid, message = %message.message, "evicting a pod");
        let stop = StopPod {
            uid,
            reason: "Evicted".to_owned(),
            message: message.message.clone(),
        };
        match &self.provider {
            Some(provider) => {
                if let Err(error) = provider.try_send(stop) {
                    // The pod stays active, so the next eviction pass picks it again.
                    tracing::warn!(%error, "the pod lifecycle provider was not told to stop the pod");
                }
            }
            None => tracing::warn!("no pod lifecycle provider to stop the evicted pod"),
        }
        let event = PodEvent {
            warning: true,
            reason: "Evicted".to_owned(),
            message: message.message,
            annotations: message.annotations,
        };
        let record = self.api.record_pod_event(&pod, event);
        ctx.spawn(
            async move {
                if let Err(error) = record.await {
                    tracing::warn!(%error, "the eviction event was not recorded");
                }
            }
            .into_actor(self),
        );
    }
}

impl SupervisedActor for StatusManagerActor {
    fn debug_state(&self) -> serde_json::Value {
        let (unsent, held_as_the_apis, batch_passes) = self.store.read(|store| {
            (
                store.cache.unsent_pods().len(),
                store.cache.held_as_the_apis(),
                store.batch_passes,
            )
        });
        json!({
            "node": self.settings.node_name,
            "generation": self.generation,
            "batchPasses": batch_passes,
            "unsent": unsent,
            "statusesHeldAsTheApis": held_as_the_apis,
            "inFlight": self.in_flight.len(),
            "syncsAtOnce": self.settings.max_in_flight,
            "counters": self.counters,
            "lastError": self.last_error.as_ref().map(|(at, error)| json!({"at": at.to_string(), "error": error})),
        })
    }
}
