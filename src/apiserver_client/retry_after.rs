//! Honours `Retry-After` as client-go's REST client does: a 429, or any 5xx, that carries
//! `Retry-After: <seconds>` is sent again, unchanged, after that many seconds, at most
//! [`MAX_RETRIES`] times, and never when the wait would end past the request's own deadline
//! (then the answer goes back to the caller at once). Answers without the header are never
//! retried here; the actors' own backoff handles them.
//!
//! Why a tower layer under kube-rs and not a delay carried in `ApiError` for the actors to
//! wait: client-go does it in its REST client (`rest.Request.request` with `checkWait` and
//! `withRetry`), so every caller gets it; the actors' retry loops (the Lease's five attempts
//! and ensure backoff, the status's five tries) stay the kubelet's loops, on top, as in the
//! kubelet. kube-rs has its own default retry layer, but its policy is not client-go's (it
//! retries 429/503/504 with exponential backoff even without the header, ignores other 5xx,
//! makes 15 attempts and knows no deadline), so `timed_client` turns it off for this one.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;
use governor::DefaultDirectRateLimiter;
use http::{HeaderMap, Request, Response, StatusCode};
use kube::client::Body;
use tokio::time::Instant;
use tower::{BoxError, Layer, Service, buffer::Buffer, retry::Retry};

/// client-go's `maxRetries` default for a request.
pub const MAX_RETRIES: u32 = 10;

/// Capacity of the buffer that makes kube-rs's (uncloneable) service stack shareable between
/// the attempts of a request; as kube-rs's own client buffer.
const BUFFER: usize = 1024;

tokio::task_local! {
    /// The deadline of the API call running in this task, set by [`with_deadline`].
    static REQUEST_DEADLINE: Instant;
}

/// Runs `call` with `deadline` as its requests' deadline: a Retry-After that would end past it
/// is not waited out. (The layer runs in the caller's task: kube-rs's client buffer hands the
/// response future back to the caller, so a task-local reaches it.)
pub async fn with_deadline<F: Future>(deadline: Instant, call: F) -> F::Output {
    REQUEST_DEADLINE.scope(deadline, call).await
}

/// client-go's `checkWait`: the seconds a 429 or 5xx answer asks the client to wait, when its
/// `Retry-After` is a whole number of seconds (an HTTP date is not honoured, as in client-go;
/// a negative number is no wait).
pub fn server_asked_wait(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let seconds: i64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.max(0).unsigned_abs()))
}

/// How long to wait before sending the request again after `retries` retries so far, or
/// `None` to hand the answer back: no Retry-After, retries used up, or the wait would end at or
/// past `deadline` (leaving the retried request no time).
pub fn retry_wait(
    status: StatusCode,
    headers: &HeaderMap,
    retries: u32,
    now: Instant,
    deadline: Option<Instant>,
) -> Option<Duration> {
    let wait = server_asked_wait(status, headers)?;
    if retries >= MAX_RETRIES {
        return None;
    }
    match deadline {
        Some(deadline) if now.checked_add(wait).is_none_or(|until| until >= deadline) => None,
        _ => Some(wait),
    }
}

/// The per-request retry state (tower clones the policy for each request).
#[derive(Clone)]
pub struct RetryAfterPolicy {
    retries: u32,
    /// The client's rate limiter, which a retried request waits for too (client-go's
    /// `tryThrottle` in `withRetry.Before`); `None` for the never-limited heartbeat client.
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl<B> tower::retry::Policy<Request<Body>, Response<B>, BoxError> for RetryAfterPolicy {
    type Future = BoxFuture<'static, ()>;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let deadline = REQUEST_DEADLINE.try_with(|deadline| *deadline).ok();
        let wait = retry_wait(
            response.status(),
            response.headers(),
            self.retries,
            Instant::now(),
            deadline,
        );
        let Some(wait) = wait else {
            if let Some(asked) = server_asked_wait(response.status(), response.headers()) {
                tracing::debug!(
                    status = response.status().as_u16(),
                    ?asked,
                    retries = self.retries,
                    uri = %request.uri(),
                    "Retry-After not waited out: retries used up, or past the request's deadline"
                );
            }
            return None;
        };
        self.retries += 1;
        tracing::debug!(
            status = response.status().as_u16(),
            ?wait,
            retry = self.retries,
            uri = %request.uri(),
            "the API server asked for a retry after a wait; sending the request again then"
        );
        let limiter = self.limiter.clone();
        Some(Box::pin(async move {
            tokio::time::sleep(wait).await;
            if let Some(limiter) = limiter {
                limiter.until_ready().await;
            }
        }))
    }

    /// The same request again; kube-rs's request bodies are whole bytes, which clone (a
    /// streamed body would not, and is then never retried, as client-go needs a rewindable one).
    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        let mut copy = Request::new(request.body().try_clone()?);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

/// The layer: retries above a buffer around the inner stack (the attempts of one request each
/// call the inner service, which kube-rs boxes without `Clone`).
#[derive(Clone)]
pub struct RetryAfterLayer {
    policy: RetryAfterPolicy,
}

impl RetryAfterLayer {
    pub fn new(limiter: Option<Arc<DefaultDirectRateLimiter>>) -> Self {
        Self {
            policy: RetryAfterPolicy {
                retries: 0,
                limiter,
            },
        }
    }
}

impl<S> Layer<S> for RetryAfterLayer
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
{
    type Service = Retry<RetryAfterPolicy, Buffer<Request<Body>, S::Future>>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry::new(self.policy.clone(), Buffer::new(inner, BUFFER))
    }
}

#[cfg(test)]
#[path = "retry_after_tests.rs"]
mod tests;
