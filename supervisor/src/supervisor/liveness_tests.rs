//! Hang detection on paused tokio time: an idle actor is never woken, a poll busy past
//! `liveness_timeout` is declared hung within the timeout plus one check period, and a panic
//! stays a panic however long its hook runs. The children share the supervisor's thread
//! (`same_thread`), so a blocked handler is stood in for by setting its busy mark.

use std::time::Duration;

use actix::{Actor, Context, Handler, Message};
use tokio::time::Instant;

use super::paused_tests::{paused_config, start, state, until};
use crate::{ChildSpec, ChildState, SupervisedActor, Supervisor, SupervisorHandle, mailbox};

const TIMEOUT: Duration = Duration::from_secs(5);
/// `liveness_timeout / 5`, the default ratio.
const CHECK_PERIOD: Duration = Duration::from_secs(1);

fn liveness_config() -> crate::SupervisorConfig {
    let mut config = paused_config(100);
    config.liveness_timeout = TIMEOUT;
    config.liveness_interval = CHECK_PERIOD;
    config
}

fn last_failure(handle: &SupervisorHandle, name: &str) -> String {
    handle
        .actor(name)
        .and_then(|actor| actor.last_failure)
        .map(|failure| failure.reason)
        .unwrap_or_default()
}

#[actix_rt::test]
async fn an_idle_actor_is_never_sent_anything_nor_woken() {
    tokio::time::pause();
    let handle = start(liveness_config());
    until(&handle, (ChildState::Running, 0)).await;
    tokio::time::sleep(CHECK_PERIOD).await; // past its start-up polls
    let before = handle.actor("idle").expect("listed");
    let wakeups = before.wakeups.expect("an instance runs");

    // Ten minutes: 600 checks, each of which used to ping the instance.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let after = handle.actor("idle").expect("listed");
    assert_eq!(after.wakeups, Some(wakeups), "the idle instance was woken");
    assert_eq!(after.mailbox.handled, 0, "nothing was sent to it");
    assert_eq!((after.state, after.restarts), (ChildState::Running, 0));
}

#[actix_rt::test]
async fn a_poll_busy_past_the_timeout_is_hung_within_the_timeout_and_one_check_period() {
    tokio::time::pause();
    let handle = start(liveness_config());
    until(&handle, (ChildState::Running, 0)).await;
    // Start mid-way between two checks: the worst case sees the spell one period late.
    tokio::time::sleep(CHECK_PERIOD / 2).await;
    let liveness = handle.instance_liveness("idle").expect("an instance runs");
    // What a handler blocking its thread leaves behind: a poll that began and never ended.
    liveness.begin();
    let blocked_at = Instant::now();
    while state(&handle) == (ChildState::Running, 0) {
        assert!(
            blocked_at.elapsed() < TIMEOUT * 4,
            "the hang went unnoticed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = blocked_at.elapsed();
    assert!(
        took >= TIMEOUT && took <= TIMEOUT + CHECK_PERIOD,
        "declared hung {took:?} after the poll began (timeout {TIMEOUT:?}, check every {CHECK_PERIOD:?})"
    );
    assert!(
        last_failure(&handle, "idle").starts_with("hung: busy in one poll for"),
        "{}",
        last_failure(&handle, "idle")
    );
    until(&handle, (ChildState::Running, 1)).await;
}

/// Panics on request.
struct Fragile;

impl Actor for Fragile {
    type Context = Context<Self>;
}

impl SupervisedActor for Fragile {}

#[derive(Message)]
#[rtype(result = "()")]
struct Explode;

impl Handler<Explode> for Fragile {
    type Result = ();

    fn handle(&mut self, _: Explode, _: &mut Context<Self>) {
        panic!("the test asked this handler to panic");
    }
}

#[actix_rt::test]
async fn a_panicking_handler_is_reported_as_a_panic_never_as_a_hang() {
    tokio::time::pause();
    let (address, inbox) = mailbox::<Fragile>(8);
    let handle = Supervisor::builder(liveness_config())
        .child(ChildSpec::new("idle", inbox, || Fragile))
        .start();
    until(&handle, (ChildState::Running, 0)).await;

    // A hook still symbolising a backtrace: busy, but marked panicking first thing.
    let liveness = handle.instance_liveness("idle").expect("an instance runs");
    liveness.begin();
    liveness.mark_panicking();
    tokio::time::sleep(TIMEOUT * 10).await;
    assert_eq!(
        state(&handle),
        (ChildState::Running, 0),
        "a panicking instance is left to its exit guard: {}",
        last_failure(&handle, "idle")
    );
    liveness.end();

    // A real panic: the hook marks the instance, the exit guard reports the panic.
    address.try_send(Explode).expect("queued");
    until(&handle, (ChildState::Running, 1)).await;
    assert!(
        liveness.is_panicking(),
        "the panic hook marked the instance"
    );
    assert!(
        last_failure(&handle, "idle").starts_with("panicked: the test asked this handler to panic"),
        "{}",
        last_failure(&handle, "idle")
    );
}
