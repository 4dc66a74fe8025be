//! The heartbeat path under API faults, through the emulator's fault injection (skipped, and
//! said so, against a real cluster): registration retries with backoff, Lease renewals are not
//! held up by hung status PATCHes, a hung connection is abandoned, and with the node-lifecycle
//! controller running the node never goes Unknown.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::Api;
use nodepulse::node::NodeAddresses;
use nodepulse_actors::messages::RuntimeHealth;
use nodepulse_emulator::{EmulatorConfig, FaultAction, FaultRule, LifecycleConfig, Verb};
use nodepulse_supervisor::SupervisorHandle;
use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    eventually_async,
    node::{healthy_runtime, report_healthy_and_wait_ready, start_api_actors},
    node_history::NodeHistory,
};

/// Renewals every second (a 4 s lease); status computed every second; heartbeat requests time
/// out after min(1 s, 4 s) = 1 s.
const YAML: &str = "nodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 5m\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";

async fn start(cluster: &TestCluster, name: &str) -> (SupervisorHandle, NodeAddresses) {
    start_api_actors(&cluster.kubeconfig, name, YAML).await
}

async fn renew_time(cluster: &TestCluster, name: &str) -> Option<Timestamp> {
    let lease = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease")
        .get_opt(name)
        .await
        .ok()
        .flatten()?;
    lease.spec?.renew_time.map(|time| time.0)
}

async fn ready_status(cluster: &TestCluster, name: &str) -> Option<String> {
    let node = Api::<Node>::all(cluster.client.clone())
        .get_opt(name)
        .await
        .ok()
        .flatten()?;
    node.status?
        .conditions?
        .into_iter()
        .find(|condition| condition.type_ == "Ready")
        .map(|condition| condition.status)
}

/// Watches `count` renewals and returns the longest gap between consecutive renewTimes.
async fn renewals(cluster: &TestCluster, name: &str, count: usize) -> Duration {
    let mut last = renew_time(cluster, name).await.expect("a lease");
    let mut longest = Duration::ZERO;
    for _ in 0..count {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(seen) = renew_time(cluster, name).await.filter(|seen| *seen > last) {
                longest =
                    longest.max(Duration::try_from(seen.duration_since(last)).unwrap_or_default());
                last = seen;
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no renewal after {last} within {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    longest
}

fn skip_unless_emulator(cluster: &TestCluster, test: &str) -> bool {
    if cluster.is_emulator() {
        return false;
    }
    nodepulse_testkit::skip::skipped(test, "the emulator's fault injection");
    true
}

#[actix_rt::test]
async fn registration_retries_with_backoff_while_the_api_refuses() {
    let cluster = TestCluster::start().await;
    if skip_unless_emulator(
        &cluster,
        "registration_retries_with_backoff_while_the_api_refuses",
    ) {
        return;
    }
    let faults = cluster.faults();
    faults.inject(
        FaultRule::new(FaultAction::Error {
            code: 503,
            message: None,
        })
        .verb(Verb::Create)
        .resource("nodes")
        .times(3),
    );
    let name = unique_node_name("faults-register");
    let (_supervisor, addresses) = start(&cluster, &name).await;
    addresses
        .node_status
        .try_send(healthy_runtime())
        .expect("queued");
    eventually_async("the node is registered after the refusals", || async {
        ready_status(&cluster, &name).await.is_some()
    })
    .await;
    assert_eq!(faults.counters().errors, 3, "every refusal was retried");
}

#[actix_rt::test]
async fn renewals_go_on_while_status_patches_hang() {
    let cluster = TestCluster::start().await;
    if skip_unless_emulator(&cluster, "renewals_go_on_while_status_patches_hang") {
        return;
    }
    let name = unique_node_name("faults-status-hang");
    let (_supervisor, addresses) = start(&cluster, &name).await;
    report_healthy_and_wait_ready(&cluster.client, &name, &addresses).await;
    eventually_async("the lease exists", || async {
        renew_time(&cluster, &name).await.is_some()
    })
    .await;

    let faults = cluster.faults();
    faults.inject(
        FaultRule::new(FaultAction::Hang)
            .verb(Verb::Patch)
            .resource("nodes")
            .subresource("status"),
    );
    // A change makes NodeStatus try (and hang on) status PATCHes over and over.
    addresses
        .node_status
        .try_send(RuntimeHealth {
            network_error: Some("network state unknown".into()),
            ..healthy_runtime()
        })
        .expect("queued");
    let longest = renewals(&cluster, &name, 5).await;
    assert!(
        faults.counters().hangs > 0,
        "status PATCHes were hanging meanwhile"
    );
    // Renewals are 1 s apart; coupled to the hung PATCHes they would stop altogether.
    assert!(
        longest < Duration::from_secs(3),
        "longest gap between renewals: {longest:?}"
    );
}

#[actix_rt::test]
async fn a_hung_lease_request_is_abandoned_and_renewals_resume() {
    let cluster = TestCluster::start().await;
    if skip_unless_emulator(
        &cluster,
        "a_hung_lease_request_is_abandoned_and_renewals_resume",
    ) {
        return;
    }
    let name = unique_node_name("faults-lease-hang");
    let (_supervisor, addresses) = start(&cluster, &name).await;
    addresses
        .node_status
        .try_send(healthy_runtime())
        .expect("queued");
    eventually_async("the lease exists", || async {
        renew_time(&cluster, &name).await.is_some()
    })
    .await;

    let faults = cluster.faults();
    faults.inject(
        FaultRule::new(FaultAction::Hang)
            .verb(Verb::Patch)
            .resource("leases")
            .times(3),
    );
    renewals(&cluster, &name, 3).await;
    assert_eq!(
        faults.counters().hangs,
        3,
        "three renewals hung and were given up on"
    );
}

#[actix_rt::test]
async fn the_node_lifecycle_controller_never_marks_the_node_unknown() {
    let seconds: u64 = std::env::var("NODEPULSE_SOAK_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20);
    let cluster = TestCluster::start_with(EmulatorConfig {
        address: "127.0.0.1:0".parse().expect("address"),
        lifecycle: LifecycleConfig {
            enabled: true,
            monitor_period: Duration::from_millis(500),
            grace_period: Duration::from_secs(4),
            startup_grace_period: Duration::from_secs(10),
        },
        ..EmulatorConfig::default()
    })
    .await;
    if skip_unless_emulator(
        &cluster,
        "the_node_lifecycle_controller_never_marks_the_node_unknown",
    ) {
        return;
    }
    let name = unique_node_name("faults-soak");
    let (_supervisor, addresses) = start(&cluster, &name).await;
    report_healthy_and_wait_ready(&cluster.client, &name, &addresses).await;

    // Every write of the Node from here on, as the emulator's change history hands it to a
    // watch: a condition Unknown for a single write, or a taint that came and went, is seen.
    let history = NodeHistory::start(&cluster.client, &name).await;
    let since = Instant::now();
    // Proving that something never happens needs a window: the soak's (20 s unless
    // NODEPULSE_SOAK_SECONDS says otherwise) is five times the controller's 4 s grace period
    // and twice its 10 s startup grace, with a monitor pass every 500 ms, so a missed renewal
    // or a late status would have made the node Unknown within it.
    let window_end = tokio::time::Instant::now() + Duration::from_secs(seconds);
    // The runtime keeps reporting, as RuntimeProbe would every 5 s.
    let mut reports = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = reports.tick() => {
                addresses
                    .node_status
                    .try_send(healthy_runtime())
                    .expect("queued");
            }
            () = tokio::time::sleep_until(window_end) => break,
        }
    }
    assert_eq!(
        history.gaps(),
        Vec::<String>::new(),
        "the watch saw every write"
    );
    let versions = history.versions_since(since);
    let wrong: Vec<_> = versions
        .iter()
        .filter(|version| {
            version.unreachable
                || version
                    .conditions
                    .values()
                    .any(|status| status == "Unknown")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "the controller gave up on the node in {} of {} writes: {wrong:#?}",
        wrong.len(),
        versions.len()
    );
    assert_eq!(ready_status(&cluster, &name).await.as_deref(), Some("True"));
}
