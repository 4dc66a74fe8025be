//! The retries of one Event write, on paused time: what is tried again, how often, how far
//! apart.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use super::*;

fn connection_refused() -> ApiError {
    let cause = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    ApiError::Transport {
        message: cause.to_string(),
        source: Arc::new(cause),
    }
}

fn forbidden() -> ApiError {
    ApiError::Refused {
        code: 403,
        reason: "Forbidden".to_owned(),
        message: "events is forbidden".to_owned(),
    }
}

/// A write failing with `failures` in turn, then succeeding; how many times it was tried.
fn failing(
    failures: Vec<ApiError>,
) -> (
    Arc<AtomicU32>,
    impl FnMut() -> BoxFuture<'static, ApiResult<u32>>,
) {
    let tries = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&tries);
    let attempt = move || {
        let try_index = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let outcome = failures.get(try_index).cloned().map_or(Ok(1_u32), Err);
        Box::pin(async move { outcome }) as BoxFuture<'static, ApiResult<u32>>
    };
    (tries, attempt)
}

#[tokio::test(start_paused = true)]
async fn a_write_without_an_answer_is_tried_again_a_random_part_then_the_whole_sleep_later() {
    let started = Instant::now();
    let (tries, attempt) = failing(vec![
        connection_refused(),
        ApiError::Timeout(Duration::from_secs(10)),
    ]);
    let written = with_retries(attempt, RETRY_SLEEP).await;
    assert_eq!(written.ok(), Some(1));
    assert_eq!(
        tries.load(Ordering::SeqCst),
        3,
        "two failures, then written"
    );
    let took = started.elapsed();
    assert!(
        took >= RETRY_SLEEP && took < RETRY_SLEEP * 2,
        "a random part of 10 s, then 10 s: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_from_the_server_is_not_tried_again() {
    let started = Instant::now();
    let (tries, attempt) = failing(vec![forbidden()]);
    let written = with_retries(attempt, RETRY_SLEEP).await;
    assert!(matches!(written, Err(ApiError::Refused { code: 403, .. })));
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_write_is_given_up_after_twelve_tries() {
    let started = Instant::now();
    let (tries, attempt) = failing(vec![connection_refused(); 20]);
    let written = with_retries(attempt, RETRY_SLEEP).await;
    assert!(matches!(written, Err(ApiError::Transport { .. })));
    assert_eq!(tries.load(Ordering::SeqCst), MAX_TRIES_PER_EVENT);
    let took = started.elapsed();
    // Ten whole sleeps after the random first one: 100 s to 110 s, as client-go's ~2 minutes.
    assert!(
        took >= RETRY_SLEEP * 10 && took < RETRY_SLEEP * 11,
        "{took:?}"
    );
}

/// A sink whose server refuses every connection (nothing listens on port 1).
fn sink_of_an_unreachable_server() -> Arc<EventSink> {
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    let quota = governor::Quota::per_second(std::num::NonZeroU32::MIN);
    Arc::new(EventSink::new(
        governor::RateLimiter::direct(quota),
        client,
        Arc::new(governor::RateLimiter::direct(quota)),
        Duration::from_secs(1),
        tokio::runtime::Handle::current(),
    ))
}

fn event_from(source: &str) -> Event {
    Event {
        source: Some(k8s_openapi::api::core::v1::EventSource {
            host: Some(source.to_owned()),
            ..Default::default()
        }),
        reason: Some("Starting".to_owned()),
        ..Default::default()
    }
}

/// The queues hold a thousand Events in all, whatever the sources (a fleet's nodes share
/// them): the next is dropped at once, the queued ones wait their turn.
#[tokio::test(start_paused = true)]
async fn past_a_thousand_queued_events_in_all_the_next_is_dropped() {
    use futures::FutureExt;

    let sink = sink_of_an_unreachable_server();
    let now = Timestamp::now();
    // Recorded without yielding: no queue's task has taken an Event yet.
    let mut waiting: Vec<_> = (0..MAX_QUEUED_EVENTS)
        .map(|index| sink.record(event_from(&format!("node-{}", index % 10)), now))
        .collect();
    assert_eq!(sink.lock().queued, MAX_QUEUED_EVENTS);
    let full_before = API_METRICS.events(EventOutcome::QUEUE_FULL);
    let dropped = sink.record(event_from("node-11"), now).now_or_never();
    assert_eq!(
        API_METRICS.events(EventOutcome::QUEUE_FULL),
        full_before + 1,
        "counted in /metrics"
    );
    assert!(
        matches!(dropped, Some(Ok(()))),
        "the 1,001st is dropped at once"
    );
    assert!(
        waiting[0].as_mut().now_or_never().is_none(),
        "a queued one waits for its write"
    );
    assert_eq!(sink.lock().by_source.len(), 10, "one queue a source");
}
