//! What the attack tests share: the emulator with a node-lifecycle loop as fast as the daemon's
//! shortened intervals, the daemon configuration that shortens them (configuration only, no
//! special code paths), and waiting for a node to be Ready under both.

use std::time::Duration;

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::Api;
use nodepulse_emulator::{EmulatorConfig, LifecycleConfig};

use crate::{
    cluster::TestCluster,
    daemon::{DaemonProcess, attack_config},
    eventually_async,
    observer::conditions,
    pods::{create, pod_manifest, running_and_ready, wait_pod},
};

/// The supervised actors of a node, as the debug endpoint names them. Attacking one more actor
/// is adding its name here.
pub const NODE_ACTORS: &[&str] = &[
    "node-status",
    "lease",
    "runtime-probe",
    "eviction-signal",
    "status-manager",
    "pod-lifecycle",
];

/// `nodeLeaseDurationSeconds` of the attacked daemons: renewals every 2 s.
pub const LEASE_SECONDS: u64 = 8;
/// The Lease renew interval that follows (a quarter of the duration, as the kubelet does).
pub const RENEW_INTERVAL: Duration = Duration::from_secs(LEASE_SECONDS / 4);
/// `nodeStatusUpdateFrequency` (and report frequency): the status period.
pub const STATUS_PERIOD: Duration = Duration::from_secs(2);
/// The supervisor's liveness timeout: how long a hung actor goes unnoticed at most.
pub const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

/// The daemon settings for attacks, beside [`crate::daemon::attack_config`]'s.
pub fn shortened_intervals(max_restarts: u32) -> String {
    format!(
        "nodeStatusUpdateFrequency: {status}s\nnodeStatusReportFrequency: {status}s\nnodeLeaseDurationSeconds: {LEASE_SECONDS}\nsupervision:\n  livenessTimeout: {liveness}s\n  livenessInterval: 250ms\n  maxRestarts: {max_restarts}\n  restartWindow: 60s\n  backoff: {{initial: 100ms, max: 1s, jitter: 0.1}}\n",
        status = STATUS_PERIOD.as_secs(),
        liveness = LIVENESS_TIMEOUT.as_secs(),
    )
}

/// An emulator whose node-lifecycle controller gives up on a node after one lease duration of
/// silence (the kubelet's defaults keep grace ≈ lease duration, 40–50 s against 40 s).
pub fn lifecycle_emulator() -> EmulatorConfig {
    EmulatorConfig {
        address: "127.0.0.1:0".parse().expect("address"),
        lifecycle: LifecycleConfig {
            enabled: true,
            monitor_period: Duration::from_millis(500),
            grace_period: Duration::from_secs(LEASE_SECONDS),
            startup_grace_period: Duration::from_secs(60),
        },
        ..EmulatorConfig::default()
    }
}

/// Whether the test can run here; says SKIPPED otherwise (the emulator's fault injection or
/// lifecycle loop is needed, and a real cluster has neither at test speed).
pub fn needs_emulator(cluster: &TestCluster, test: &str) -> bool {
    if cluster.is_emulator() {
        return true;
    }
    crate::skip::skipped(test, "the emulator's fault injection and lifecycle loop");
    false
}

/// Waits until `name` is Ready=True and its Lease has been renewed.
pub async fn wait_ready_with_lease(client: &kube::Client, name: &str) {
    let nodes = Api::<Node>::all(client.clone());
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    eventually_async("the Node is Ready=True and has a Lease", || async {
        let ready = nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| conditions(&node).get("Ready").map(String::as_str) == Some("True"));
        let lease = leases
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|lease| lease.spec.and_then(|spec| spec.renew_time).is_some());
        ready && lease
    })
    .await;
}

/// The Node's Ready heartbeat (lastHeartbeatTime), when it has one.
pub async fn ready_heartbeat(client: &kube::Client, name: &str) -> Option<jiff::Timestamp> {
    let node = Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .ok()
        .flatten()?;
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")?
        .last_heartbeat_time
        .map(|time| time.0)
}

/// Starts a daemon for node `name` with the attack configuration, the shortened intervals and
/// a restart bound of `max_restarts`, and waits until the node is Ready with a Lease.
pub async fn ready_daemon(cluster: &TestCluster, name: &str, max_restarts: u32) -> DaemonProcess {
    let daemon = DaemonProcess::start(
        &cluster.kubeconfig,
        name,
        &attack_config(&shortened_intervals(max_restarts)),
    )
    .await;
    wait_ready_with_lease(&cluster.client, name).await;
    daemon
}

/// Creates pod `pod` in `default`, bound to `node`, and waits until it is Running and Ready.
pub async fn running_pod(client: &kube::Client, node: &str, pod: &str) {
    create(
        client,
        &pod_manifest(pod, "default", node, serde_json::json!({})),
    )
    .await;
    wait_pod(client, "default", pod, "Running", running_and_ready).await;
}

/// Stops `daemon` and deletes its Node and the pods bound to it, so a run against a shared
/// cluster leaves nothing behind (the Lease goes with the Node, its owner).
pub async fn clean_up(cluster: &TestCluster, daemon: DaemonProcess, name: &str) {
    drop(daemon);
    let pods =
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(cluster.client.clone(), "default");
    let bound = kube::api::ListParams::default().fields(&format!("spec.nodeName={name}"));
    if let Ok(list) = pods.list(&bound).await {
        for pod in list {
            if let Some(pod) = pod.metadata.name {
                let _ = pods.delete(&pod, &kube::api::DeleteParams::default()).await;
            }
        }
    }
    cluster.delete_node(name).await;
}
