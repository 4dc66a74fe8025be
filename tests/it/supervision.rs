//! The supervisor detects every way an actor can die (stop, panic, hang), restarts it with
//! backoff, bounds restarts, and loses no message sent while the actor was down.

use std::{
    num::NonZeroU32,
    time::{Duration, Instant},
};

use nodepulse_supervisor::{
    ActorRequestError, BackoffPolicy, ChildSpec, ChildState, IntensityPolicy, KillMode,
    RestartPolicy, SendError, Supervisor, SupervisorConfig, SupervisorHandle, mailbox,
};
use nodepulse_testkit::{
    PATIENCE,
    actors::{Count, Explode, Record, RecorderStore, StopYourself},
    eventually,
};

fn fast_config() -> SupervisorConfig {
    let mut config = SupervisorConfig::new("test-node");
    config.backoff = BackoffPolicy {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        multiplier: 2.0,
        jitter: 0.0,
        reset_after: Duration::from_secs(60),
    };
    config.intensity = IntensityPolicy {
        max_restarts: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
        window: Duration::from_secs(60),
    };
    config.liveness_interval = Duration::from_millis(20);
    config.liveness_timeout = Duration::from_secs(2);
    config
}

fn state_of(handle: &SupervisorHandle, name: &str) -> (ChildState, u64) {
    let actor = handle
        .actor(name)
        .unwrap_or_else(|| panic!("actor {name} is listed"));
    (actor.state, actor.restarts)
}

async fn running_again(handle: &SupervisorHandle, name: &str, restarts: u64) {
    eventually(
        &format!("{name} runs again after {restarts} restarts"),
        || state_of(handle, name) == (ChildState::Running, restarts),
    )
    .await;
}

fn last_failure(handle: &SupervisorHandle, name: &str) -> String {
    handle
        .actor(name)
        .and_then(|actor| actor.last_failure)
        .map(|failure| failure.reason)
        .unwrap_or_default()
}

#[actix_rt::test]
async fn each_kill_mode_is_detected_and_the_actor_restarted() {
    let store = RecorderStore::default();
    let (_address, inbox) = mailbox(64);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;

    for (round, (mode, expected)) in [
        (KillMode::Stop, "killed on request (mode stop)"),
        (KillMode::Panic, "panicked: fault injection"),
        (KillMode::Hang, "hung: busy in one poll"),
    ]
    .into_iter()
    .enumerate()
    {
        let killed_at = Instant::now();
        let accepted = handle
            .kill("recorder", mode)
            .await
            .expect("kill is accepted");
        assert_eq!(accepted.mode, mode);
        let restarts = u64::try_from(round).unwrap_or(0) + 1;
        running_again(&handle, "recorder", restarts).await;
        eprintln!(
            "restart latency for {mode}: {:?} (kill → running again)",
            killed_at.elapsed()
        );
        assert!(
            last_failure(&handle, "recorder").starts_with(expected),
            "failure after {mode} is {:?}",
            last_failure(&handle, "recorder")
        );
        assert_eq!(
            store.instances(),
            restarts + 1,
            "a fresh instance was built for {mode}"
        );
    }
}

#[actix_rt::test]
async fn a_panicking_handler_takes_down_neither_the_process_nor_its_siblings() {
    let faulty = RecorderStore::default();
    let sibling = RecorderStore::default();
    let (faulty_address, faulty_inbox) = mailbox(16);
    let (sibling_address, sibling_inbox) = mailbox(16);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("faulty", faulty_inbox, faulty.factory()))
        .child(ChildSpec::new("sibling", sibling_inbox, sibling.factory()))
        .start();
    running_again(&handle, "faulty", 0).await;

    faulty_address.try_send(Explode).expect("queued");
    running_again(&handle, "faulty", 1).await;
    assert!(last_failure(&handle, "faulty").contains("boom: the test asked this handler to panic"));

    sibling_address.try_send(Record(7)).expect("queued");
    assert_eq!(sibling_address.request(Count).await, Ok(1));
    assert_eq!(state_of(&handle, "sibling"), (ChildState::Running, 0));
    assert_eq!(sibling.instances(), 1, "the sibling was never restarted");
}

#[actix_rt::test]
async fn messages_sent_while_the_actor_is_down_are_handled_after_the_restart() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(256);
    let mut config = fast_config();
    config.backoff.initial = Duration::from_millis(400);
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;
    address.try_send(Record(0)).expect("queued");
    assert_eq!(address.request(Count).await, Ok(1));

    handle
        .kill("recorder", KillMode::Panic)
        .await
        .expect("kill is accepted");
    eventually("the recorder is backing off", || {
        state_of(&handle, "recorder").0 == ChildState::Backoff
    })
    .await;
    for value in 1..=200 {
        address
            .try_send(Record(value))
            .expect("a down actor's mailbox still takes messages");
    }
    assert!(
        handle
            .actor("recorder")
            .is_some_and(|actor| actor.mailbox.mailbox.depth == 200)
    );

    running_again(&handle, "recorder", 1).await;
    assert_eq!(address.request(Count).await, Ok(201));
    assert_eq!(
        store.received(),
        (0..=200).collect::<Vec<u64>>(),
        "all delivered, in order"
    );
}

#[actix_rt::test]
async fn a_full_mailbox_refuses_loudly_and_hands_the_message_back() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(4);
    let mut config = fast_config();
    config.backoff.initial = Duration::from_secs(5);
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;
    handle
        .kill("recorder", KillMode::Stop)
        .await
        .expect("kill is accepted");
    eventually("the recorder is backing off", || {
        state_of(&handle, "recorder").0 == ChildState::Backoff
    })
    .await;

    for value in 0..4 {
        address.try_send(Record(value)).expect("room for four");
    }
    match address.try_send(Record(99)) {
        Err(SendError::Full(Record(99))) => {}
        other => panic!(
            "expected Full with the message back, got {:?}",
            other.map_err(|error| error.to_string())
        ),
    }
    let actor = handle.actor("recorder").expect("listed");
    assert_eq!(
        (
            actor.mailbox.mailbox.depth,
            actor.mailbox.mailbox.capacity,
            actor.mailbox.mailbox.high_water
        ),
        (4, 4, 4)
    );
}

#[actix_rt::test]
async fn backoff_grows_with_consecutive_restarts_and_resets_after_a_stable_run() {
    // Paused time: the stable run below passes at once and exactly, on the children's own
    // thread (a paused clock is per runtime).
    tokio::time::pause();
    let store = RecorderStore::default();
    let (_address, inbox) = mailbox(8);
    let mut config = fast_config();
    config.same_thread = true;
    config.backoff.initial = Duration::from_millis(50);
    config.backoff.reset_after = Duration::from_millis(1500);
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;

    let mut delays = Vec::new();
    for restarts in 1..=3 {
        handle
            .kill("recorder", KillMode::Stop)
            .await
            .expect("kill is accepted");
        running_again(&handle, "recorder", restarts).await;
        delays.push(announced_delay(&handle));
    }
    assert_eq!(delays, vec![50, 100, 200], "announced backoff in ms");

    tokio::time::sleep(Duration::from_millis(1600)).await; // a stable run longer than resetAfter
    handle
        .kill("recorder", KillMode::Stop)
        .await
        .expect("kill is accepted");
    running_again(&handle, "recorder", 4).await;
    assert_eq!(
        announced_delay(&handle),
        50,
        "the delay starts over after a stable run"
    );
}

/// The backoff the supervisor chose after the recorder's last failure, in milliseconds.
fn announced_delay(handle: &SupervisorHandle) -> u128 {
    let failure = handle
        .actor("recorder")
        .and_then(|actor| actor.last_failure)
        .expect("a failure was recorded");
    let seconds = failure
        .restart_delay_seconds
        .expect("the failure was followed by a restart");
    Duration::from_secs_f64(seconds).as_millis()
}

#[actix_rt::test]
async fn exceeding_the_restart_intensity_escalates_and_closes_every_mailbox() {
    let faulty = RecorderStore::default();
    let sibling = RecorderStore::default();
    let (faulty_address, faulty_inbox) = mailbox(8);
    let (sibling_address, sibling_inbox) = mailbox(8);
    let mut config = fast_config();
    config.intensity = IntensityPolicy {
        max_restarts: NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN),
        window: Duration::from_secs(60),
    };
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("faulty", faulty_inbox, faulty.factory()))
        .child(ChildSpec::new("sibling", sibling_inbox, sibling.factory()))
        .start();

    for restarts in 1..=2 {
        running_again(&handle, "faulty", restarts - 1).await;
        faulty_address.try_send(Explode).expect("queued");
        running_again(&handle, "faulty", restarts).await;
    }
    assert!(
        handle.escalation().is_none(),
        "two restarts are within the bound"
    );
    faulty_address.try_send(Explode).expect("queued");

    let escalation = tokio::time::timeout(PATIENCE, handle.escalated())
        .await
        .expect("escalates");
    assert_eq!(escalation.child, "faulty");
    assert!(escalation.last_failure.contains("boom"), "{escalation}");
    assert!(
        escalation
            .to_string()
            .contains("exceeded its restart intensity (2 restarts within 60s)")
    );
    assert_eq!(state_of(&handle, "faulty").0, ChildState::Escalated);
    eventually("the sibling is stopped", || {
        state_of(&handle, "sibling").0 == ChildState::Stopped
    })
    .await;
    assert!(matches!(
        sibling_address.try_send(Record(1)),
        Err(SendError::Closed(_))
    ));
    assert!(
        !handle.problems().is_empty(),
        "an escalated node is unhealthy"
    );
}

#[actix_rt::test]
async fn restart_policies_decide_who_comes_back() {
    let permanent = RecorderStore::default();
    let transient = RecorderStore::default();
    let temporary = RecorderStore::default();
    let (permanent_address, permanent_inbox) = mailbox(8);
    let (transient_address, transient_inbox) = mailbox(8);
    let (temporary_address, temporary_inbox) = mailbox(8);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new(
            "permanent",
            permanent_inbox,
            permanent.factory(),
        ))
        .child(
            ChildSpec::new("transient", transient_inbox, transient.factory())
                .restart(RestartPolicy::Transient),
        )
        .child(
            ChildSpec::new("temporary", temporary_inbox, temporary.factory())
                .restart(RestartPolicy::Temporary),
        )
        .start();
    for name in ["permanent", "transient", "temporary"] {
        running_again(&handle, name, 0).await;
    }

    permanent_address.try_send(StopYourself).expect("queued");
    running_again(&handle, "permanent", 1).await;

    transient_address.try_send(Explode).expect("queued");
    running_again(&handle, "transient", 1).await;
    transient_address.try_send(StopYourself).expect("queued");
    eventually("the transient child stays stopped", || {
        state_of(&handle, "transient").0 == ChildState::Stopped
    })
    .await;

    temporary_address.try_send(Explode).expect("queued");
    eventually("the temporary child stays stopped", || {
        state_of(&handle, "temporary").0 == ChildState::Stopped
    })
    .await;
    assert!(matches!(
        temporary_address.try_send(Record(1)),
        Err(SendError::Closed(_))
    ));
    assert_eq!((transient.instances(), temporary.instances()), (2, 1));
}

#[actix_rt::test]
async fn a_flood_from_many_senders_never_deadlocks_a_small_mailbox() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(8);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    let senders: Vec<_> = (0..10u64)
        .map(|sender| {
            let address = address.clone();
            actix_rt::spawn(async move {
                for value in 0..1_000 {
                    address
                        .send(Record(sender * 1_000 + value))
                        .await
                        .map_err(|error| error.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for sender in senders {
        sender
            .await
            .expect("sender task")
            .expect("every send is accepted");
    }
    assert_eq!(address.request(Count).await, Ok(10_000));
    let actor = handle.actor("recorder").expect("listed");
    assert_eq!(
        actor.mailbox.mailbox.high_water, 8,
        "the queue filled up to its bound"
    );
    assert_eq!(actor.mailbox.handled_by_type.get("Record"), Some(&10_000));
    assert_eq!(
        actor.mailbox.last_message.map(|last| last.message_type),
        Some("Count".to_owned())
    );
}

#[actix_rt::test]
async fn debug_state_and_errors_for_unknown_or_stopped_actors() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(8);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()).restart(RestartPolicy::Temporary))
        .start();
    running_again(&handle, "recorder", 0).await;
    address.try_send(Record(1)).expect("queued");
    assert_eq!(address.request(Count).await, Ok(1));
    let state = handle
        .actor_state("recorder", PATIENCE)
        .await
        .expect("a running actor answers");
    assert_eq!(state, serde_json::json!({ "instance": 1, "recorded": 1 }));

    assert_eq!(
        handle.kill("nobody", KillMode::Stop).await.map(|_| ()),
        Err(ActorRequestError::UnknownActor("nobody".to_owned()))
    );
    address.try_send(StopYourself).expect("queued");
    eventually("the recorder stopped", || {
        state_of(&handle, "recorder").0 == ChildState::Stopped
    })
    .await;
    assert!(matches!(
        handle.kill("recorder", KillMode::Panic).await,
        Err(ActorRequestError::NotRunning {
            state: ChildState::Stopped,
            ..
        })
    ));
}

#[actix_rt::test]
async fn shutdown_stops_every_child_and_closes_mailboxes() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(8);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;
    assert!(handle.shutdown(PATIENCE).await, "every instance ended");
    assert_eq!(state_of(&handle, "recorder"), (ChildState::Stopped, 0));
    assert!(matches!(
        address.try_send(Record(1)),
        Err(SendError::Closed(_))
    ));
}

#[actix_rt::test]
async fn an_actor_nobody_can_write_to_keeps_running() {
    let store = RecorderStore::default();
    // Paused time, the children on the supervisor's thread: the window below passes at once.
    tokio::time::pause();
    let (address, inbox) = mailbox(8);
    drop(address); // a timer-driven actor may have no peers at all
    let mut config = fast_config();
    config.same_thread = true;
    let liveness = (config.liveness_timeout, config.liveness_interval);
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;
    // An idle instance must never be taken for a hung one, nor a closed mailbox for an end:
    // the window is one liveness timeout and several checks past it, long enough for either
    // mistake to have restarted the instance.
    tokio::time::sleep(liveness.0 + 5 * liveness.1).await;
    let state = handle
        .actor_state("recorder", PATIENCE)
        .await
        .expect("the instance is alive");
    assert_eq!(state["instance"], 1);
    assert_eq!(state_of(&handle, "recorder"), (ChildState::Running, 0));
}

#[actix_rt::test]
async fn a_recipient_reaches_the_actor_across_a_restart() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(8);
    let recipient = address.recipient::<Record>();
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .start();
    running_again(&handle, "recorder", 0).await;
    recipient.try_send(Record(1)).expect("queued");
    handle
        .kill("recorder", KillMode::Stop)
        .await
        .expect("killed");
    recipient
        .try_send(Record(2))
        .expect("queued while restarting");
    running_again(&handle, "recorder", 1).await;
    assert_eq!(address.request(Count).await, Ok(2));
    assert_eq!(store.received(), vec![1, 2]);
}

#[actix_rt::test]
async fn shutdown_drains_run_while_the_children_still_answer() {
    let store = RecorderStore::default();
    let (address, inbox) = mailbox(8);
    let drained = std::sync::Arc::new(std::sync::Mutex::new(None));
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .drain_on_shutdown({
            let (address, drained) = (address.clone(), std::sync::Arc::clone(&drained));
            Box::new(move || {
                let (address, drained) = (address.clone(), std::sync::Arc::clone(&drained));
                Box::pin(async move {
                    address
                        .try_send(Record(7))
                        .expect("still open while draining");
                    *drained.lock().expect("drained") = Some(address.request(Count).await);
                })
            })
        })
        .start();
    running_again(&handle, "recorder", 0).await;
    assert!(handle.shutdown(PATIENCE).await, "every instance ended");
    assert_eq!(
        *drained.lock().expect("drained"),
        Some(Ok(1)),
        "the drain's message was handled before the stop"
    );
    assert_eq!(state_of(&handle, "recorder"), (ChildState::Stopped, 0));
}

#[actix_rt::test]
async fn a_drain_that_overruns_is_abandoned_within_the_deadline() {
    let store = RecorderStore::default();
    let (_address, inbox) = mailbox(8);
    let handle = Supervisor::builder(fast_config())
        .child(ChildSpec::new("recorder", inbox, store.factory()))
        .drain_on_shutdown(Box::new(|| Box::pin(std::future::pending())))
        .start();
    running_again(&handle, "recorder", 0).await;
    let deadline = Duration::from_secs(2);
    let asked = Instant::now();
    assert!(
        handle.shutdown(deadline).await,
        "the stop still had the second half of the deadline"
    );
    let took = asked.elapsed();
    assert!(
        took >= deadline / 2 && took < deadline + Duration::from_secs(1),
        "the drain had half the deadline, then the stop went ahead ({took:?})"
    );
    assert_eq!(state_of(&handle, "recorder"), (ChildState::Stopped, 0));
}
