//! Waiting for a condition without sleeping and hoping: poll it, and fail with what was
//! awaited after [`PATIENCE`]. Shared by the black-box tests and the CRI pod benchmark.

use std::{
    future::Future,
    time::{Duration, Instant},
};

/// How long any condition may take before a test fails; generous, since CI machines are slow.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `condition` until it holds, failing the test with `what` after [`PATIENCE`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`eventually`], for conditions that must be awaited.
pub async fn eventually_async<F, Fut>(what: &str, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_async_within(PATIENCE, what, condition).await;
}

/// [`eventually_async`] with a patience of its own, for what takes several of the node's
/// back-offs by design.
pub async fn eventually_async_within<F, Fut>(patience: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {patience:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
