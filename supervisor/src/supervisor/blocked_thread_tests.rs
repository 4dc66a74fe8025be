//! A thread blocked for real on a shared pool: the instance that blocks it is declared hung by
//! its own busy mark, and an idle instance of another node on the same thread (never polled,
//! so its own mark is clear) by the thread's mark, so both are restarted on a fresh thread.

use std::{sync::mpsc as blocking, time::Duration};

use actix::{Actor, Context, Handler, Message};
use tokio::time::Instant;

use crate::{
    ChildSpec, ChildState, Mailbox, SharedArbiters, SupervisedActor, Supervisor, SupervisorConfig,
    SupervisorHandle, mailbox,
};

/// Blocks its thread on request, until the test lets go.
struct Blocker;

impl Actor for Blocker {
    type Context = Context<Self>;
}

impl SupervisedActor for Blocker {}

#[derive(Message)]
#[rtype(result = "()")]
struct BlockOn(blocking::Receiver<()>);

impl Handler<BlockOn> for Blocker {
    type Result = ();

    fn handle(&mut self, BlockOn(release): BlockOn, _: &mut Context<Self>) {
        let _ = release.recv();
    }
}

fn node(shared: &SharedArbiters, name: &str) -> (SupervisorHandle, Mailbox<Blocker>) {
    let mut config = SupervisorConfig::new(name);
    config.shared_arbiters = Some(shared.clone());
    config.liveness_interval = Duration::from_millis(20);
    config.liveness_timeout = Duration::from_millis(300);
    config.backoff.initial = Duration::from_millis(10);
    let (address, inbox) = mailbox::<Blocker>(8);
    let handle = Supervisor::builder(config)
        .child(ChildSpec::new("blocker", inbox, || Blocker))
        .start();
    (handle, address)
}

async fn restarted(handle: &SupervisorHandle) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let actor = handle.actor("blocker").expect("listed");
        if (actor.state, actor.restarts) == (ChildState::Running, 1) {
            return actor
                .last_failure
                .map(|failure| failure.reason)
                .unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "{} was never restarted",
            handle.node()
        );
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

#[actix_rt::test]
async fn an_idle_instance_on_a_blocked_shared_thread_is_restarted_with_its_blocker() {
    let shared = SharedArbiters::new(1);
    let (culprit, culprit_address) = node(&shared, "node-a");
    let (bystander, _bystander_address) = node(&shared, "node-b");
    for handle in [&culprit, &bystander] {
        let deadline = Instant::now() + Duration::from_secs(30);
        while handle.actor("blocker").map(|actor| actor.state) != Some(ChildState::Running) {
            assert!(Instant::now() < deadline, "{} starts", handle.node());
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    }

    let (release, hold) = blocking::channel();
    culprit_address.try_send(BlockOn(hold)).expect("queued");
    let culprit_reason = restarted(&culprit).await;
    let bystander_reason = restarted(&bystander).await;
    assert!(
        culprit_reason.starts_with("hung: busy in one poll"),
        "{culprit_reason}"
    );
    assert!(
        bystander_reason.starts_with("hung: its thread blocked by another actor"),
        "{bystander_reason}"
    );
    assert_eq!(
        shared.threads(),
        1,
        "a fresh thread replaced the blocked one"
    );

    drop(release); // the blocked thread returns, its fenced instances stop, and it is stopped
    assert!(culprit.shutdown(Duration::from_secs(10)).await);
    assert!(bystander.shutdown(Duration::from_secs(10)).await);
}
