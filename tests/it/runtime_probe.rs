//! RuntimeProbeActor against a real containerd (its own, on a private socket): RuntimeReady
//! and NetworkReady=false (NetworkPluginNotReady) without a CNI config, NetworkReady once one
//! is written, with no restart; a killed containerd leaves the last success to age and a
//! restarted one is found again; no socket at all is said plainly; the pod CIDR is pushed once;
//! and a runtime call that never returns stops neither the health updates nor the actor.

use nodepulse_testkit::collector;
use nodepulse_testkit::containerd;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use collector::{Received, collector, test_supervisor};
use containerd::Containerd;
use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::{
    messages::RuntimeHealth,
    ports::{
        ImageFsUsage, ImageInfo, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion,
    },
    runtime_probe::{
        NETWORK_STATE_UNKNOWN, ProbeStore, RuntimeProbeActor, RuntimeProbeSettings, UpdatePodCidr,
    },
};
use nodepulse_cri::client::CriClient;
use nodepulse_supervisor::{ChildSpec, Kept, Mailbox, SupervisorHandle, mailbox};
use nodepulse_testkit::{eventually, eventually_async};

const PERIOD: Duration = Duration::from_millis(200);

fn start_probe(
    node: &str,
    runtime: Arc<dyn RuntimeService>,
    request_timeout: Duration,
) -> (
    SupervisorHandle,
    Received<RuntimeHealth>,
    Mailbox<RuntimeProbeActor>,
) {
    let (builder, health, received) =
        collector::<RuntimeHealth>(test_supervisor(node), "node-status");
    let settings = RuntimeProbeSettings {
        probe_period: PERIOD,
        request_timeout,
    };
    let store = Kept::<ProbeStore>::default();
    let (address, inbox) = mailbox(16);
    let supervisor = builder
        .child(ChildSpec::new("runtime-probe", inbox, move || {
            RuntimeProbeActor::new(
                settings.clone(),
                Some(Arc::clone(&runtime)),
                health.clone(),
                store.clone(),
            )
        }))
        .start();
    (supervisor, received, address)
}

fn client(endpoint: &str) -> CriClient {
    CriClient::new(endpoint, Duration::from_secs(2)).expect("a unix endpoint")
}

fn runtime_ready(health: &RuntimeHealth) -> bool {
    health.last_successful_probe.is_some() && health.runtime_error.is_none()
}

#[actix_rt::test]
async fn network_ready_follows_the_cni_config_without_a_runtime_restart() {
    let Some(()) = Containerd::required("network_ready_follows_the_cni_config") else {
        return;
    };
    let containerd = Containerd::start();
    let cri = client(&containerd.endpoint());
    let (_supervisor, received, probe) =
        start_probe("runtime-cni", Arc::new(cri.clone()), Duration::from_secs(2));
    eventually("containerd reports RuntimeReady", || {
        received.last().as_ref().is_some_and(runtime_ready)
    })
    .await;
    let health = received.last().expect("health");
    let network_error = health.network_error.clone().unwrap_or_default();
    assert!(
        network_error.starts_with(
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:"
        ),
        "{network_error}\n{}",
        containerd.log()
    );
    assert!(
        health
            .runtime_version
            .as_deref()
            .is_some_and(|version| version.starts_with("containerd://")),
        "{health:?}"
    );
    assert!(!health.simulated);

    containerd.write_cni_config();
    let written = Instant::now();
    let deadline = written + nodepulse_testkit::PATIENCE;
    while received
        .first_since(written, |health| health.network_error.is_none())
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "NetworkReady never turned true: {:?}\n{}",
            received.last(),
            containerd.log()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (ready_at, health) = received
        .first_since(written, |health| health.network_error.is_none())
        .expect("ready");
    assert!(runtime_ready(&health));
    eprintln!(
        "CNI conflist written → RuntimeHealth NetworkReady: {:?}",
        ready_at - written
    );

    // The image filesystem, for the eviction signals, and the pod CIDR push (once per value).
    let filesystems = cri.image_fs_info().await.expect("ImageFsInfo");
    assert!(
        filesystems
            .iter()
            .any(|fs| fs.mountpoint.starts_with(containerd.root())),
        "{filesystems:?}"
    );
    assert_eq!(
        probe
            .request(UpdatePodCidr("10.244.1.0/24".to_owned()))
            .await,
        Ok(true)
    );
    eventually_async("the pushed CIDR is recorded", || async {
        probe
            .request(UpdatePodCidr("10.244.1.0/24".to_owned()))
            .await
            == Ok(false)
    })
    .await;
}

#[actix_rt::test]
async fn a_killed_runtime_is_left_to_age_and_found_again_after_a_restart() {
    let Some(()) = Containerd::required("a_killed_runtime_is_left_to_age") else {
        return;
    };
    let mut containerd = Containerd::start();
    let (supervisor, received, _probe) = start_probe(
        "runtime-kill",
        Arc::new(client(&containerd.endpoint())),
        Duration::from_secs(2),
    );
    eventually("containerd reports RuntimeReady", || {
        received.last().as_ref().is_some_and(runtime_ready)
    })
    .await;

    containerd.kill();
    let killed = Instant::now();
    let stale = |health: &RuntimeHealth| {
        health
            .last_successful_probe
            .is_some_and(|last| last.into_std() < killed)
            && health
                .observed_at
                .duration_since(jiff::Timestamp::now())
                .abs()
                < jiff::SignedDuration::from_secs(5)
    };
    // Health keeps coming every period, carrying the last success from before the kill.
    eventually(
        "the probe keeps reporting the old success for a second",
        || {
            received
                .all()
                .iter()
                .any(|(at, health)| *at >= killed + Duration::from_secs(1) && stale(health))
        },
    )
    .await;
    let state = supervisor
        .actor_state("runtime-probe", Duration::from_secs(5))
        .await
        .expect("debug state");
    assert!(state["failuresInARow"].as_u64() >= Some(2), "{state}");
    let failure = state["lastFailure"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(failure.contains("containerd.sock"), "{failure}");
    let during = received
        .all()
        .iter()
        .filter(|(at, _)| *at >= killed)
        .count();
    assert!(
        during >= 3,
        "only {during} health messages in the outage: not sent every period"
    );

    containerd.restart();
    let restarted = Instant::now();
    eventually("a success after the restart", || {
        received
            .first_since(restarted, |health| {
                health
                    .last_successful_probe
                    .is_some_and(|last| last.into_std() >= restarted)
            })
            .is_some()
    })
    .await;
    let (found_at, _) = received
        .first_since(restarted, |health| {
            health
                .last_successful_probe
                .is_some_and(|last| last.into_std() >= restarted)
        })
        .expect("found");
    eprintln!(
        "containerd restarted → probe success again: {:?}",
        found_at - restarted
    );
}

#[actix_rt::test]
async fn no_runtime_socket_is_said_plainly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("absent.sock");
    let (_supervisor, received, _probe) = start_probe(
        "runtime-absent",
        Arc::new(client(&format!("unix://{}", socket.display()))),
        Duration::from_secs(2),
    );
    eventually("the probe reports", || received.last().is_some()).await;
    let health = received.last().expect("health");
    assert_eq!(
        health.runtime_error,
        Some(format!(
            "container runtime not reachable: no container runtime socket at {}",
            socket.display()
        ))
    );
    assert_eq!(health.network_error.as_deref(), Some(NETWORK_STATE_UNKNOWN));
    assert_eq!(health.last_successful_probe, None);
}

/// A runtime whose every call hangs, as a CRI call stuck behind a hung CNI plugin does.
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

#[actix_rt::test]
async fn a_hanging_runtime_call_stops_neither_the_health_updates_nor_the_actor() {
    let (supervisor, received, _probe) = start_probe(
        "runtime-hang",
        Arc::new(HangingRuntime),
        Duration::from_secs(60),
    );
    eventually("five periods of health while the first probe hangs", || {
        received.all().len() >= 5
    })
    .await;
    let health = received.last().expect("health");
    assert_eq!(
        health.last_successful_probe, None,
        "status check not completed yet"
    );
    let state = supervisor
        .actor_state("runtime-probe", Duration::from_secs(5))
        .await
        .expect("the actor answers while its probe hangs");
    assert!(
        state["probeInProgressSeconds"].as_f64() > Some(0.0),
        "{state}"
    );
    assert_eq!(
        supervisor
            .actor("runtime-probe")
            .map(|actor| actor.restarts),
        Some(0)
    );
}
