//! LeaseActor against the in-memory Lease API on paused tokio time: the renew interval, its
//! upward jitter and the first wait, minutes of renewals in milliseconds of real time.

use std::{sync::Arc, time::Duration};

use actix::Actor;

use super::{LeaseActor, LeaseSettings, round_tests::FakeLeaseApi};
use crate::ports::fakes::eventually;

fn lease_actor(api: &FakeLeaseApi) -> LeaseActor {
    let settings = LeaseSettings {
        node: "worker-1".to_owned(),
        lease_duration_seconds: 40,
    };
    LeaseActor::new(settings, Arc::new(api.clone()))
}

#[actix_rt::test]
async fn the_lease_is_renewed_every_quarter_of_its_duration_jittered_upwards() {
    tokio::time::pause();
    let api = FakeLeaseApi::with_node("uid-1");
    let _lease = lease_actor(&api).start();
    eventually("the lease is created", Duration::from_secs(1), || {
        api.state().creates == 1
    })
    .await;

    // Rounds every 10 s to 10.4 s: nine renewals by 95 s (the ninth by 93.6 s, a tenth not
    // before 100 s).
    tokio::time::sleep(Duration::from_secs(95)).await;
    assert_eq!(api.state().renewals.len(), 9);
    assert_eq!(api.state().creates, 1, "renewed, never created again");
}

#[actix_rt::test]
async fn the_first_round_waits_for_the_start_phase() {
    tokio::time::pause();
    let api = FakeLeaseApi::with_node("uid-1");
    let _lease = lease_actor(&api)
        .with_first_wait(Duration::from_secs(7))
        .start();
    tokio::time::sleep(Duration::from_millis(6900)).await;
    assert_eq!(api.state().creates, 0, "nothing before the phase");
    let took = eventually("the lease is created", Duration::from_secs(1), || {
        api.state().creates == 1
    })
    .await;
    assert!(
        took <= Duration::from_millis(110),
        "created at 7 s ({took:?} after 6.9 s)"
    );
}
