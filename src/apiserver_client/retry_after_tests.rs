use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nodepulse_actors::ports::ApiError;

use super::*;
use crate::apiserver_client::timed;

fn headers(retry_after: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(value) = retry_after {
        headers.insert(
            http::header::RETRY_AFTER,
            value.parse().expect("a header value"),
        );
    }
    headers
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).expect("a status code")
}

#[test]
fn only_429_and_5xx_with_retry_after_seconds_are_waited_for_as_client_go_check_wait() {
    let cases: [(u16, Option<&str>, Option<u64>); 10] = [
        (429, Some("3"), Some(3)),
        (503, Some("2"), Some(2)),
        (500, Some("1"), Some(1)),
        (504, Some("0"), Some(0)),
        (502, Some("-1"), Some(0)),
        (429, None, None),
        (503, None, None),
        (429, Some("Wed, 21 Oct 2026 07:28:00 GMT"), None),
        (404, Some("3"), None),
        (409, Some("3"), None),
    ];
    for (code, retry_after, expected) in cases {
        assert_eq!(
            server_asked_wait(status(code), &headers(retry_after)),
            expected.map(Duration::from_secs),
            "{code} with Retry-After {retry_after:?}"
        );
    }
}

#[test]
fn retries_stop_after_ten_and_never_wait_past_the_deadline() {
    let now = Instant::now();
    let asked = headers(Some("2"));
    let wait = |retries, deadline| retry_wait(status(429), &asked, retries, now, deadline);
    assert_eq!(wait(0, None), Some(Duration::from_secs(2)));
    assert_eq!(wait(MAX_RETRIES - 1, None), Some(Duration::from_secs(2)));
    assert_eq!(wait(MAX_RETRIES, None), None, "client-go's maxRetries");
    let seconds = |n| Some(now + Duration::from_secs(n));
    assert_eq!(wait(0, seconds(3)), Some(Duration::from_secs(2)));
    assert_eq!(wait(0, seconds(2)), None, "no time left for the retry");
    assert_eq!(wait(0, seconds(1)), None);
    assert_eq!(wait(0, Some(now)), None);
}

/// A kube client over the layer and a fake API server whose first `faulted` answers are
/// `code` with `retry_after`, then the Lease; and the count of requests it received.
fn fake_server(
    code: u16,
    retry_after: Option<&'static str>,
    faulted: u32,
) -> (kube::Client, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let server = tower::service_fn(move |_request: Request<Body>| {
        let call = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut response = Response::builder().header("content-type", "application/json");
            let body = if call < faulted {
                if let Some(seconds) = retry_after {
                    response = response.header("Retry-After", seconds);
                }
                response = response.status(code);
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "slow down", "reason": "TooManyRequests", "code": code})
            } else {
                serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1", "namespace": "kube-node-lease"}})
            };
            Ok::<_, Infallible>(response.body(body.to_string()).expect("a response"))
        }
    });
    let layered = RetryAfterLayer::new(None).layer(server);
    (kube::Client::new(layered, "default"), calls)
}

fn leases(client: kube::Client) -> Api<Lease> {
    Api::namespaced(client, "kube-node-lease")
}

#[tokio::test(start_paused = true)]
async fn the_same_request_is_sent_again_after_each_retry_after_and_then_succeeds() {
    let (client, calls) = fake_server(429, Some("3"), 2);
    let started = Instant::now();
    let lease = timed(Duration::from_secs(10), leases(client).get("n1"))
        .await
        .expect("the third attempt succeeds");
    assert_eq!(lease.metadata.name.as_deref(), Some("n1"));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(6),
        "two waits of 3 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_error_with_retry_after_is_retried_and_one_without_is_handed_back() {
    let (client, calls) = fake_server(500, Some("1"), 1);
    timed(Duration::from_secs(10), leases(client).get("n1"))
        .await
        .expect("retried after 1 s");
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let (client, calls) = fake_server(429, None, 1);
    let started = Instant::now();
    let error = timed(Duration::from_secs(10), leases(client).get("n1"))
        .await
        .expect_err("no Retry-After: the caller's backoff decides");
    assert!(
        matches!(&error, ApiError::Refused { code: 429, .. }),
        "{error:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_deadline_hands_the_answer_back_at_once() {
    // As a Lease renewal with a 5 s heartbeat timeout told to come back in 30 s.
    let (client, calls) = fake_server(429, Some("30"), u32::MAX);
    let started = Instant::now();
    let error = timed(Duration::from_secs(5), leases(client).get("n1"))
        .await
        .expect_err("the 429 itself, not a timeout");
    assert!(
        matches!(&error, ApiError::Refused { code: 429, .. }),
        "{error:?}"
    );
    assert_eq!(
        (calls.load(Ordering::SeqCst), started.elapsed()),
        (1, Duration::ZERO)
    );

    // Waits of 2 s fit twice in 5 s (at 2 s and 4 s); a third would end at 6 s.
    let (client, calls) = fake_server(503, Some("2"), u32::MAX);
    let started = Instant::now();
    let error = timed(Duration::from_secs(5), leases(client).get("n1"))
        .await
        .expect_err("still unavailable");
    assert!(
        matches!(&error, ApiError::Refused { code: 503, .. }),
        "{error:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn without_a_deadline_a_request_is_retried_at_most_ten_times() {
    let (client, calls) = fake_server(429, Some("1"), u32::MAX);
    let started = Instant::now();
    leases(client)
        .get("n1")
        .await
        .expect_err("still throttled after ten retries");
    assert_eq!(calls.load(Ordering::SeqCst), 1 + MAX_RETRIES);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(u64::from(MAX_RETRIES))
    );
}
