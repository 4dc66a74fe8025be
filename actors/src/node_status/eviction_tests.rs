//! EvictionSignalActor feeding NodeStatusActor, against a fake host and the fake Node API, on
//! paused tokio time: pressure reaches the Node at once, and leaves only after the transition
//! period, in milliseconds of real time.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use actix::Actor;
use nodepulse_supervisor::{Kept, Recipient};

use super::actor_tests::start_registered;
use crate::{
    eviction::{
        EvictionSettings, EvictionSignalActor, ThresholdConfig, default_eviction_hard,
        parse_thresholds,
    },
    messages::PressureChanged,
    ports::fakes::{
        eventually,
        host::{FakeHost, GIB},
        node::FakeNodeApi,
    },
};

const HOUSEKEEPING: Duration = Duration::from_secs(10);
const TRANSITION: Duration = Duration::from_secs(300);
/// Long enough that only a PressureChanged can explain a PATCH within one housekeeping pass.
const NODE_STATUS_TICK: Duration = Duration::from_secs(600);

fn settings() -> EvictionSettings {
    let (hard, empty) = (default_eviction_hard(), BTreeMap::new());
    let config = ThresholdConfig {
        hard: &hard,
        soft: &empty,
        soft_grace_period: &BTreeMap::new(),
        minimum_reclaim: &empty,
    };
    EvictionSettings {
        thresholds: parse_thresholds(&config, true).expect("the defaults are valid"),
        housekeeping_interval: HOUSEKEEPING,
        pressure_transition_period: TRANSITION,
        runtime_request_timeout: Duration::from_secs(2),
    }
}

fn memory_pressure(api: &FakeNodeApi) -> Option<String> {
    api.condition("MemoryPressure").map(|(status, _)| status)
}

#[actix_rt::test]
async fn memory_pressure_is_patched_at_once_and_cleared_only_after_the_transition_period() {
    tokio::time::pause();
    let api = FakeNodeApi::default();
    let node_status = start_registered(&api, NODE_STATUS_TICK).await;
    let host = FakeHost::with_memory_available(4 * GIB);
    let to_node_status = Recipient::<PressureChanged>::from_fn(move |pressure| {
        node_status.do_send(pressure);
        Ok(())
    });
    let _eviction = EvictionSignalActor::new(
        settings(),
        Arc::new(host.clone()),
        None,
        to_node_status,
        Kept::default(),
    )
    .start();
    eventually("the first pass reports no pressure", HOUSEKEEPING, || {
        memory_pressure(&api).as_deref() == Some("False")
    })
    .await;

    host.state().memory_available_bytes = 50 << 20; // under the 100Mi hard threshold
    let took = eventually("MemoryPressure turns True", HOUSEKEEPING * 3, || {
        memory_pressure(&api).as_deref() == Some("True")
    })
    .await;
    assert!(
        took <= HOUSEKEEPING + Duration::from_secs(1),
        "on the next pass, not the node status tick ({took:?})"
    );

    host.state().memory_available_bytes = 4 * GIB;
    let passes = host.state().observed;
    let took = eventually(
        "MemoryPressure turns False",
        TRANSITION + HOUSEKEEPING * 3,
        || memory_pressure(&api).as_deref() == Some("False"),
    )
    .await;
    assert!(
        took >= TRANSITION - HOUSEKEEPING,
        "the condition stays until the transition period has passed since the last pressure ({took:?})"
    );
    assert!(
        host.state().observed - passes >= 29,
        "every housekeeping pass ran meanwhile"
    );
}
