//! In-memory fakes of the ports for actor-level tests, one per port, each recording the calls
//! it gets and answering as the API server (or the host) would. Tests only.

pub mod container_runtime;
pub mod host;
pub mod node;
pub mod pod_cgroups;
pub mod strategic;

use std::time::Duration;

use tokio::time::Instant;

/// Polls `condition` every 10 ms of tokio time until it holds and returns how much tokio time
/// that took; fails after `budget`. On paused time the clock jumps to the actors' next timer
/// whenever everything waits, so a budget of minutes costs milliseconds.
pub async fn eventually(what: &str, budget: Duration, condition: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < budget, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

/// A wall clock that moves with tokio's (paused) clock, from the real time it was made at.
pub fn paused_wall_clock() -> crate::clock::WallClock {
    crate::clock::following_tokio()
}
