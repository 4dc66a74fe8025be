//! The two signal actors as the daemon wires them (`NodeActors` with `Parts::SIGNALS`): on the real
//! host, with a NodeStatus mailbox that nobody drains (a flood must not stall them), and with a
//! runtime whose calls hang (the host's signals must not wait for it).

use nodepulse_testkit::collector;

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use collector::{Collector, collector, test_supervisor};
use futures::{FutureExt, future::BoxFuture};
use nodepulse::{
    config::{Config, Settings, Source},
    host::HostProbe,
    node::{NodeActors, NodeResources, Parts},
};
use nodepulse_actors::{
    messages::{PressureChanged, RuntimeHealth},
    ports::{
        HostSignals, ImageFsUsage, ImageInfo, RuntimeResult, RuntimeService, RuntimeStatus,
        RuntimeVersion,
    },
};
use nodepulse_supervisor::{ChildState, mailbox};
use nodepulse_testkit::{eventually, eventually_async};

/// RuntimeProbe and EvictionSignal of `settings`, reporting to the test's collectors.
fn signal_actors(
    settings: &Settings,
    resources: Option<NodeResources>,
    health: nodepulse_supervisor::Recipient<RuntimeHealth>,
    pressure: nodepulse_supervisor::Recipient<PressureChanged>,
) -> NodeActors {
    let node = NodeActors::new(settings)
        .parts(Parts::SIGNALS)
        .report_signals_to(health, pressure);
    match resources {
        Some(resources) => node.resources(resources),
        None => node,
    }
}

fn settings(yaml: &str) -> Settings {
    Settings {
        config: Config::parse(yaml, Source::File("test.yaml".into())).expect("valid test config"),
        node_name: "signals".to_owned(),
        kubeconfig: None,
        standalone: false,
        bootstrap: None,
    }
}

/// The real host, through the daemon's wiring: thresholds above anything this machine has
/// raise all three conditions; the same actors report a simulated runtime as healthy.
#[actix_rt::test]
async fn thresholds_above_the_real_hosts_free_memory_disk_and_pids_raise_every_condition() {
    let root_dir: PathBuf = std::env::temp_dir().join("nodepulse-no-such-root-dir");
    let settings = settings(&format!(
        "runtime: simulated\nrootDir: {}\nhousekeepingInterval: 1s\nevictionHard:\n  memory.available: 1Ei\n  nodefs.available: 1Ei\n  pid.available: 1e15\n",
        root_dir.display()
    ));
    let builder = test_supervisor("eviction-host");
    let (builder, health, runtime) = collector::<RuntimeHealth>(builder, "node-status-runtime");
    let (builder, pressure, received) = collector::<PressureChanged>(builder, "node-status");
    let pass = Instant::now();
    let _ = HostProbe::host(&settings.config.root_dir).observe_blocking(None);
    eprintln!(
        "one housekeeping read of the real host: {:?}",
        pass.elapsed()
    );
    let _supervisor = signal_actors(&settings, None, health, pressure)
        .add_to(builder)
        .expect("the signal actors are wired")
        .0
        .start();
    eventually("the first pass is reported", || received.last().is_some()).await;
    let message = received.last().expect("a message");
    assert!(
        message.memory_pressure && message.disk_pressure && message.pid_pressure,
        "{message:?}"
    );
    for name in [
        "memory.available",
        "nodefs.available",
        "imagefs.available",
        "pid.available",
    ] {
        assert!(
            message
                .signals
                .iter()
                .any(|signal| signal.signal == name && signal.capacity > 0),
            "{name} observed in {message:?}"
        );
    }
    // Each met threshold says since when it has been met, no later than the observation.
    for name in ["memory.available", "nodefs.available", "pid.available"] {
        let signal = message
            .signals
            .iter()
            .find(|signal| signal.signal == name)
            .expect("observed");
        assert!(
            signal
                .threshold_met_since
                .is_some_and(|since| since <= signal.observed_at),
            "{name}: {signal:?}"
        );
    }
    eventually("the simulated runtime reports healthy", || {
        runtime.last().is_some()
    })
    .await;
    let health = runtime.last().expect("health");
    assert!(health.simulated && health.runtime_error.is_none() && health.network_error.is_none());
    assert!(health.last_successful_probe.is_some());
}

/// NodeStatus never drains its mailbox (capacity 1): both actors keep running, answer their
/// liveness pings and keep measuring; what could not be delivered is simply sent again later.
#[actix_rt::test]
async fn a_full_node_status_mailbox_stalls_neither_signal_actor() {
    let settings =
        settings("runtime: simulated\nruntimeProbePeriod: 100ms\nhousekeepingInterval: 1s\n");
    let (health, _health_inbox) = mailbox::<Collector<RuntimeHealth>>(1);
    let (pressure, _pressure_inbox) = mailbox::<Collector<PressureChanged>>(1);
    let supervisor = signal_actors(&settings, None, health.recipient(), pressure.recipient())
        .add_to(test_supervisor("signals-flood"))
        .expect("the signal actors are wired")
        .0
        .start();
    eventually_async(
        "three housekeeping passes with the consumer full",
        || async {
            supervisor
                .actor_state("eviction-signal", Duration::from_secs(5))
                .await
                .is_ok_and(|state| state["passes"].as_u64() >= Some(3))
        },
    )
    .await;
    assert_eq!(
        (health.depth(), pressure.depth()),
        (1, 1),
        "both consumer mailboxes are full"
    );
    for name in ["runtime-probe", "eviction-signal"] {
        let actor = supervisor.actor(name).expect("supervised");
        assert_eq!(
            (actor.state, actor.restarts),
            (ChildState::Running, 0),
            "{name}"
        );
        assert!(
            supervisor
                .actor_state(name, Duration::from_secs(5))
                .await
                .is_ok(),
            "{name} answers"
        );
    }
}

/// A runtime whose every call hangs, as one stuck behind a hung CNI plugin.
struct HangingRuntime;

impl RuntimeService for HangingRuntime {
    fn status(&self) -> BoxFuture<'static, RuntimeResult<RuntimeStatus>> {
        futures::future::pending().boxed()
    }

    fn version(&self) -> BoxFuture<'static, RuntimeResult<RuntimeVersion>> {
        futures::future::pending().boxed()
    }

    fn image_fs_info(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>> {
        futures::future::pending().boxed()
    }

    fn update_pod_cidr(&self, _: String) -> BoxFuture<'static, RuntimeResult<()>> {
        futures::future::pending().boxed()
    }

    fn list_images(&self) -> BoxFuture<'static, RuntimeResult<Vec<ImageInfo>>> {
        futures::future::pending().boxed()
    }
}

/// With `runtimeRequestTimeout` at its 2m default, a hung ImageFsInfo still gets only half a
/// housekeeping interval: passes go on every second, imagefs taken as nodefs.
#[actix_rt::test]
async fn a_hung_runtime_does_not_hold_the_host_signals_back() {
    let settings = settings("housekeepingInterval: 1s\nrootDir: /\n");
    let builder = test_supervisor("signals-hung-runtime");
    let (builder, health, _runtime) = collector::<RuntimeHealth>(builder, "node-status-runtime");
    let (builder, pressure, received) = collector::<PressureChanged>(builder, "node-status");
    let host: Arc<dyn HostSignals> = Arc::new(HostProbe::host(&settings.config.root_dir));
    let resources = NodeResources {
        runtime: Some(Arc::new(HangingRuntime)),
        host,
        ..NodeResources::for_host(&settings)
    };
    let _supervisor = signal_actors(&settings, Some(resources), health, pressure)
        .add_to(builder)
        .expect("the signal actors are wired")
        .0
        .start();
    eventually("three passes while ImageFsInfo hangs", || {
        received.all().len() >= 3
    })
    .await;
    let message = received.last().expect("a pass");
    assert!(
        message
            .signals
            .iter()
            .any(|signal| signal.signal == "imagefs.available"),
        "imagefs is measured as nodefs: {message:?}"
    );
}
