//! Restart timing on paused tokio time: the children run on the supervisor's own arbiter
//! (`same_thread`), so backoff delays, stable runs and restart windows of seconds and minutes
//! pass in milliseconds of real time and are measured exactly.

use std::{num::NonZeroU32, time::Duration};

use actix::{Actor, Context};
use tokio::time::Instant;

use crate::{
    BackoffPolicy, ChildSpec, ChildState, IntensityPolicy, KillMode, SupervisedActor, Supervisor,
    SupervisorConfig, SupervisorHandle, mailbox,
};

struct Idle;

impl Actor for Idle {
    type Context = Context<Self>;
}

impl SupervisedActor for Idle {}

pub(super) fn paused_config(max_restarts: u32) -> SupervisorConfig {
    let mut config = SupervisorConfig::new("paused-node");
    config.same_thread = true;
    config.backoff = BackoffPolicy {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(30),
        multiplier: 2.0,
        jitter: 0.0,
        reset_after: Duration::from_secs(60),
    };
    config.intensity = IntensityPolicy {
        max_restarts: NonZeroU32::new(max_restarts).unwrap_or(NonZeroU32::MIN),
        window: Duration::from_secs(60),
    };
    config
}

pub(super) fn start(config: SupervisorConfig) -> SupervisorHandle {
    let (_address, inbox) = mailbox::<Idle>(8);
    Supervisor::builder(config)
        .child(ChildSpec::new("idle", inbox, || Idle))
        .start()
}

pub(super) fn state(handle: &SupervisorHandle) -> (ChildState, u64) {
    let actor = handle.actor("idle").expect("the child is known");
    (actor.state, actor.restarts)
}

/// Polls every 10 ms of tokio time until the child is `wanted`; returns the tokio time taken.
pub(super) async fn until(handle: &SupervisorHandle, wanted: (ChildState, u64)) -> Duration {
    let started = Instant::now();
    while state(handle) != wanted {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the child never got to {wanted:?}: {:?}",
            state(handle)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

async fn stop_and_time_the_restart(handle: &SupervisorHandle, restarts: u64) -> Duration {
    handle
        .kill("idle", KillMode::Stop)
        .await
        .expect("kill is accepted");
    until(handle, (ChildState::Running, restarts)).await
}

fn assert_waited(took: Duration, delay: Duration) {
    assert!(
        took >= delay && took < delay + Duration::from_millis(100),
        "restarted after {took:?}, the backoff is {delay:?}"
    );
}

#[actix_rt::test]
async fn restarts_wait_out_a_growing_backoff_that_resets_after_a_stable_run() {
    tokio::time::pause();
    let handle = start(paused_config(100));
    until(&handle, (ChildState::Running, 0)).await;

    for (restarts, seconds) in [(1, 1), (2, 2), (3, 4), (4, 8)] {
        let took = stop_and_time_the_restart(&handle, restarts).await;
        assert_waited(took, Duration::from_secs(seconds));
    }

    tokio::time::sleep(Duration::from_secs(61)).await; // a stable run longer than resetAfter
    let took = stop_and_time_the_restart(&handle, 5).await;
    assert_waited(took, Duration::from_secs(1));
}

#[actix_rt::test]
async fn restarts_spread_over_the_window_never_escalate_but_a_burst_does() {
    tokio::time::pause();
    let mut config = paused_config(3);
    // A constant 100 ms backoff, so only the restart intensity decides.
    config.backoff.initial = Duration::from_millis(100);
    config.backoff.max = Duration::from_millis(100);
    let handle = start(config);
    until(&handle, (ChildState::Running, 0)).await;

    // 3 per minute refills one restart every 20 s: one every 25 s never runs out.
    for restarts in 1..=6 {
        stop_and_time_the_restart(&handle, restarts).await;
        tokio::time::sleep(Duration::from_secs(25)).await;
    }
    assert!(handle.escalation().is_none());

    // A burst of three is admitted; the fourth within the window escalates.
    for restarts in 7..=9 {
        stop_and_time_the_restart(&handle, restarts).await;
    }
    handle
        .kill("idle", KillMode::Stop)
        .await
        .expect("kill is accepted");
    let escalation = handle.escalated().await;
    assert_eq!(
        (escalation.child.as_str(), escalation.max_restarts),
        ("idle", 3)
    );
    assert_eq!(state(&handle).0, ChildState::Escalated);
}
