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
