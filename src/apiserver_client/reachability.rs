//! One notion of "the API server is reachable", fed by every request's outcome in a tower layer
//! under kube-rs (so no adapter can forget it): a request that could not connect (refused,
//! unroutable, connect or TLS timeout) is a failure; any answer, even an error status, is the
//! server reachable. A request cut or timed out after connecting says nothing either way: the
//! server was there, and waking every retry because another request got through would undo
//! their backoff. The first answer after a run of failures announces the recovery that
//! every watch and retry wait listens to ([`ApiRecovery`]). Logs one WARN when the server
//! becomes unreachable, a reminder at most once a minute, one INFO when it is back.

use std::{
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use nodepulse_actors::ports::ApiRecovery;
use tokio::{sync::watch, time::Instant};
use tower::BoxError;

use super::{errors::with_causes, metrics::API_METRICS};

/// How often, at most, a still-unreachable API server is mentioned again in the log.
pub const REMINDER_EVERY: Duration = Duration::from_secs(60);

/// A run of failed requests.
struct Down {
    since: Instant,
    at: Timestamp,
    failed_requests: u64,
    reminded: Instant,
}

/// The API server's reachability as this process's clients see it. Cheap to share.
pub struct Reachability {
    down: Mutex<Option<Down>>,
    /// Bumped at every recovery; what [`ApiRecovery`] waits on.
    recoveries: watch::Sender<u64>,
    /// True while unreachable; what the prober waits on.
    unreachable: watch::Sender<bool>,
}

impl Default for Reachability {
    fn default() -> Self {
        Self {
            down: Mutex::new(None),
            recoveries: watch::Sender::new(0),
            unreachable: watch::Sender::new(false),
        }
    }
}

impl Reachability {
    /// A request sent at `sent` got an answer: the server is reachable, and back if it was
    /// not. An answer to a request sent before the failures began says nothing of now (it may
    /// arrive just after the connection that failed first).
    pub fn answered(&self, sent: Instant) {
        let Some(down) = self.lock().take_if(|down| sent >= down.since) else {
            return;
        };
        let down_for = down.since.elapsed();
        tracing::info!(
            ?down_for,
            since = %down.at,
            failed_requests = down.failed_requests,
            "API server reachable again"
        );
        API_METRICS.api_unreachable_since(None);
        self.unreachable.send_replace(false);
        self.recoveries.send_modify(|count| *count += 1);
    }

    /// A request got no answer, for `error`.
    pub fn failed(&self, error: &str) {
        let mut down = self.lock();
        let now = Instant::now();
        match down.as_mut() {
            None => {
                let at = Timestamp::now();
                tracing::warn!(%error, "API server unreachable; retrying until it answers");
                *down = Some(Down {
                    since: now,
                    at,
                    failed_requests: 1,
                    reminded: now,
                });
                API_METRICS.api_unreachable_since(Some(at));
                self.unreachable.send_replace(true);
            }
            Some(run) => {
                run.failed_requests += 1;
                if now.duration_since(run.reminded) >= REMINDER_EVERY {
                    run.reminded = now;
                    tracing::warn!(
                        %error,
                        since = %run.at,
                        down_for = ?now.duration_since(run.since),
                        failed_requests = run.failed_requests,
                        "API server still unreachable"
                    );
                }
            }
        }
    }

    /// When the current run of failures began; `None` while reachable.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        self.lock().as_ref().map(|down| down.at)
    }

    /// A subscription to the next recoveries.
    pub fn recovery(&self) -> ApiRecovery {
        ApiRecovery::new(self.recoveries.subscribe(), self.unreachable.subscribe())
    }

    /// Resolves once the server is unreachable (at once if it is now).
    pub async fn until_unreachable(&self) {
        let _ = self.unreachable.subscribe().wait_for(|down| *down).await;
    }

    pub fn is_unreachable(&self) -> bool {
        *self.unreachable.borrow()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Down>> {
        self.down.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `error` (or one of its causes) is hyper's "could not connect".
fn could_not_connect(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error
            .downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

/// The tower layer that reports every request's outcome (each attempt) to a [`Reachability`].
#[derive(Clone)]
pub struct ReachabilityLayer(pub Arc<Reachability>);

impl<S> tower::Layer<S> for ReachabilityLayer {
    type Service = Reporting<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Reporting {
            inner,
            reachability: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct Reporting<S> {
    inner: S,
    reachability: Arc<Reachability>,
}

impl<S, B, R> tower::Service<http::Request<B>> for Reporting<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let sent = Instant::now();
        let response = self.inner.call(request);
        let reachability = Arc::clone(&self.reachability);
        Box::pin(async move {
            let result = response.await;
            match &result {
                Ok(_) => reachability.answered(sent),
                Err(error) if could_not_connect(error.as_ref()) => {
                    reachability.failed(&with_causes(error.as_ref()));
                }
                Err(_) => {}
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_first_answer_after_failures_wakes_waiters_and_clears_the_since() {
        let reachability = Reachability::default();
        let mut recovery = reachability.recovery();
        let sent_before = Instant::now();
        reachability.answered(sent_before);
        assert!(reachability.unreachable_since().is_none());
        tokio::time::advance(Duration::from_millis(10)).await;
        reachability.failed("client error (Connect): Connection refused");
        reachability.failed("client error (Connect): Connection refused");
        assert!(reachability.is_unreachable());
        assert!(reachability.unreachable_since().is_some());
        reachability.answered(sent_before);
        assert!(
            reachability.is_unreachable(),
            "an answer to a request sent before the failures is no return"
        );
        let waiting = tokio::spawn(async move { recovery.sleep(Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        reachability.answered(Instant::now());
        assert!(
            waiting.await.expect("the wait ends"),
            "woken by the recovery"
        );
        assert!(!reachability.is_unreachable());
        assert!(reachability.unreachable_since().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn answers_while_reachable_announce_no_recovery() {
        let reachability = Reachability::default();
        let mut recovery = reachability.recovery();
        reachability.answered(Instant::now());
        reachability.answered(Instant::now());
        assert!(!recovery.sleep(Duration::from_secs(1)).await);
    }
}
