//! Where Events go once recorded: a queue per event source, written one at a time, as
//! client-go's broadcaster hands a kubelet's Events to its sink (`StartRecordingToSink`, one
//! goroutine reading one channel). The correlator decides each Event when its turn comes, after
//! the write before it updated its state (`recordToSink`), so a repeat recorded while the first
//! occurrence is still being created PATCHes what was created, in order. A write that got no
//! answer (the server unreachable, the connection cut, the request timed out) is tried again:
//! up to 12 tries, the second after a random part of 10 s, the rest 10 s apart
//! (`maxTriesPerEvent`, `defaultSleepDuration`); an Event the server answered (even with an
//! error) is not. So an Event recorded while the API server restarts reaches it once it is
//! back, and one-time Events (`Starting`, a pod's `Started`) are not lost to a short outage.
//! The queues hold at most [`MAX_QUEUED_EVENTS`] in all (client-go's `maxQueuedEvents`, one
//! kubelet's; a fleet in one process holds no more, so 10,000 nodes registering at once, five
//! Events each, do not keep 50,000 waiting for the event rate limit); past that one is
//! dropped, said in the log at most once a minute with the count. No task runs for a source
//! whose queue is empty.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::future::BoxFuture;
use governor::DefaultDirectRateLimiter;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodepulse_actors::{
    ports::{ApiError, ApiResult},
    shrink::map_after_removal,
};
use tokio::{sync::oneshot, time::Instant};

use super::{Correlators, correlator::Write, host};
use crate::apiserver_client::{
    metrics::{API_METRICS, EventOutcome},
    timed,
};

/// Events queued at most, over every source (client-go's `maxQueuedEvents`).
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// How often, at most, dropped Events are mentioned in the log.
const DROPS_LOGGED_EVERY: Duration = Duration::from_secs(60);
/// Tries of one write that gets no answer (client-go's `maxTriesPerEvent`).
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// The wait between tries (client-go's `defaultSleepDuration`); the first is a random part.
pub const RETRY_SLEEP: Duration = Duration::from_secs(10);

/// One recorded Event waiting for its turn, and who waits for its outcome.
struct Queued {
    event: Event,
    now: Timestamp,
    done: oneshot::Sender<ApiResult<()>>,
}

/// Every source's queue.
#[derive(Default)]
struct Queues {
    /// source host → the Events recorded and not yet taken. A source has an entry while its
    /// task runs (the entry may be empty while the task writes the last one it took).
    by_source: HashMap<String, VecDeque<Queued>>,
    /// Events in all the queues.
    queued: usize,
    /// Events dropped since the last log line about drops, and when that was.
    drops: u64,
    drops_logged: Option<Instant>,
}

impl Queues {
    /// Counts `event` dropped (the queues are full), saying so at most once a minute.
    fn dropped(&mut self, event: &Event) {
        self.drops += 1;
        let now = Instant::now();
        if self
            .drops_logged
            .is_some_and(|logged| now.duration_since(logged) < DROPS_LOGGED_EVERY)
        {
            return;
        }
        let reason = event.reason.as_deref().unwrap_or_default();
        tracing::warn!(
            dropped = self.drops,
            queued = self.queued,
            %reason,
            "too many events queued; events are dropped"
        );
        self.drops = 0;
        self.drops_logged = Some(now);
    }
}

/// The Event queues of every source, and what writing them needs.
pub struct EventSink {
    correlators: Correlators,
    queues: Mutex<Queues>,
    /// Writes a second over every source (the kubelet's `eventRecordQPS`/`eventBurst`, its
    /// event client's rate limit, which a write waits for).
    limiter: DefaultDirectRateLimiter,
    /// The main client, rate limited on its own as well.
    main: kube::Client,
    main_limiter: Arc<DefaultDirectRateLimiter>,
    timeout: Duration,
    /// Where the queues' tasks run: the daemon's runtime, whichever actor records.
    runtime: tokio::runtime::Handle,
}

impl EventSink {
    pub fn new(
        limiter: DefaultDirectRateLimiter,
        main: kube::Client,
        main_limiter: Arc<DefaultDirectRateLimiter>,
        timeout: Duration,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            correlators: Correlators::default(),
            queues: Mutex::default(),
            limiter,
            main,
            main_limiter,
            timeout,
            runtime,
        }
    }

    /// Queues `event` (its timestamps at `now`) behind its source's earlier Events; resolves
    /// once it is written, dropped by the spam filter or the full queue, or failed for good.
    pub fn record(
        self: &Arc<Self>,
        event: Event,
        now: Timestamp,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let source = host(&event);
        let (done, outcome) = oneshot::channel();
        let queued = Queued { event, now, done };
        let start = {
            let mut queues = self.lock();
            if queues.queued >= MAX_QUEUED_EVENTS {
                queues.dropped(&queued.event);
                API_METRICS.event(EventOutcome::QUEUE_FULL);
                return Box::pin(async { Ok(()) });
            }
            queues.queued += 1;
            API_METRICS.events_queued(queues.queued);
            match queues.by_source.get_mut(&source) {
                Some(queue) => {
                    queue.push_back(queued);
                    false
                }
                None => {
                    (queues.by_source).insert(source.clone(), VecDeque::from([queued]));
                    true
                }
            }
        };
        if start {
            self.runtime.spawn(Arc::clone(self).drain(source));
        }
        // A dropped sender: the runtime is shutting down, nothing more will be written.
        Box::pin(async move { outcome.await.unwrap_or(Ok(())) })
    }

    /// Writes `source`'s Events in order until its queue is empty.
    async fn drain(self: Arc<Self>, source: String) {
        while let Some(Queued { event, now, done }) = self.next(&source) {
            let outcome = self.write(event, now).await;
            let _ = done.send(outcome);
        }
    }

    /// The next Event of `source`, or `None` (and its entry gone) when there is none.
    fn next(&self, source: &str) -> Option<Queued> {
        let mut queues = self.lock();
        let next = queues.by_source.get_mut(source)?.pop_front();
        match next {
            Some(_) => {
                queues.queued -= 1;
                API_METRICS.events_queued(queues.queued);
            }
            None => {
                queues.by_source.remove(source);
                map_after_removal(&mut queues.by_source);
            }
        }
        next
    }

    /// Decides `event` with its source's correlator and writes what it says, trying again
    /// while no answer comes.
    async fn write(&self, event: Event, now: Timestamp) -> ApiResult<()> {
        let Some(write) = self
            .correlators
            .with(host(&event), |c| c.correlate(event, now))
        else {
            tracing::debug!("the event spam filter drops an event about an object");
            API_METRICS.event(EventOutcome::SPAM_FILTERED);
            return Ok(());
        };
        match with_retries(|| self.write_once(&write), RETRY_SLEEP).await {
            Ok(written) => {
                self.correlators
                    .with(host(&written), |c| c.written(&written));
                API_METRICS.event(EventOutcome::WRITTEN);
                Ok(())
            }
            Err(error) => {
                API_METRICS.event(EventOutcome::FAILED);
                Err(error)
            }
        }
    }

    /// One try: a POST for a new Event; for a repeat, a PATCH, and a POST when the Event is
    /// gone (deleted or expired).
    async fn write_once(&self, write: &Write) -> ApiResult<Event> {
        let event = write.event();
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        let events = Api::<Event>::namespaced(self.main.clone(), namespace);
        let create = |mut event: Event| {
            let events = events.clone();
            async move {
                event.metadata.resource_version = None;
                self.limited().await;
                timed(self.timeout, events.create(&PostParams::default(), &event)).await
            }
        };
        match write {
            Write::Create(event) => create(event.clone()).await,
            Write::Patch { event, patch } => {
                let name = event.metadata.name.clone().unwrap_or_default();
                let (params, patch) = (PatchParams::default(), Patch::Strategic(patch));
                self.limited().await;
                match timed(self.timeout, events.patch(&name, &params, &patch)).await {
                    Err(ApiError::NotFound(_)) => create(event.clone()).await,
                    other => other,
                }
            }
        }
    }

    /// Waits for a place under the event rate limit and the main client's.
    async fn limited(&self) {
        self.limiter.until_ready().await;
        self.main_limiter.until_ready().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a write failed without an answer from the server: client-go's `recordEvent`
/// retries those (its default case, "actual http transport errors") and no other.
fn unanswered(error: &ApiError) -> bool {
    matches!(error, ApiError::Transport { .. } | ApiError::Timeout(_))
}

/// `attempt` until it succeeds, the server answers with an error, or it was tried
/// [`MAX_TRIES_PER_EVENT`] times; the second try after a random part of `sleep` (so clients
/// that failed together do not retry together), each later one `sleep` after the one before.
pub async fn with_retries<T, F>(mut attempt: impl FnMut() -> F, sleep: Duration) -> ApiResult<T>
where
    F: Future<Output = ApiResult<T>>,
{
    let mut tries = 0;
    loop {
        let error = match attempt().await {
            Ok(written) => return Ok(written),
            Err(error) => error,
        };
        tries += 1;
        if !unanswered(&error) || tries >= MAX_TRIES_PER_EVENT {
            return Err(error);
        }
        tracing::debug!(%error, tries, "cannot write an event; trying again after a wait");
        API_METRICS.event_write_retried();
        let wait = match tries {
            1 => sleep.mul_f64(rand::random::<f64>()),
            _ => sleep,
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
