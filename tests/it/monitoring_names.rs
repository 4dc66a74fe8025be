//! The anchor of issue 58: the 55 metric names the kubernetes-mixin's alerts, recording rules
//! and dashboards read from a kubelet (kubernetes-monitoring/kubernetes-mixin at
//! aa38e2bfa7ea6ec6870420b483046afe790a6411, alerts/, dashboards/ and rules/; the list of
//! `monitoring-metrics.md`), held here as data: each is served by a node running real pods
//! (containerd), one mounting a claim, one under a CPU limit writing to the disk, on `/metrics/cadvisor` or `/metrics`, or has
//! its written reason for being left out.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{
    cri_pods::{NAMESPACE, UNTIL_TERM, create_pod, shell},
    kubelet_api_logs::serve_with,
    kubelet_api_volume_stats::{ClaimNode, PERIOD},
};
use nodepulse_testkit::{
    eventually_async,
    pods::wait_running,
    prometheus_text::{Family, parse},
};

/// Where a name is served, or why it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    /// On `/metrics/cadvisor`.
    Cadvisor,
    /// On `/metrics`.
    Kubelet,
    /// Never served, for the reason given.
    Left(&'static str),
    /// Served only under a condition this node does not meet, given; another test of the
    /// process may meet it (the families are process-wide), so it is not checked either way.
    Conditional(&'static str),
}

use Expected::{Cadvisor, Conditional, Kubelet, Left};

const NO_GO: &str = "nodepulse is no Go program: it has no goroutines, and no figure of its own \
                     (tokio's tasks) means the same";
const NO_CGROUP_MANAGER: &str = "nodepulse makes no pod or QoS cgroups (containerd makes each \
                                 container's), so it has no cgroup manager operations to time";
const CLIENT_ROTATION: &str = "served with rotateCertificates only, as the kubelet registers it \
                               with its client certificate manager; this node's client \
                               certificate is fixed";
const SERVING_ROTATION: &str = "served with serverTLSBootstrap only, as the kubelet registers it \
                                with its serving certificate manager; this node serves a fixed \
                                certificate";

const BLOCK_IO: &str = "served per device where the kernel accounts a container's block I/O to \
                        its cgroup (io.stat, blkio.throttle.*); the machines these tests run on \
                        account none (cgroup v1 in a VM: blkio.throttle.io_service_bytes_recursive \
                        reads `Total 0` even at the root)";

/// The mixin's names, in `monitoring-metrics.md`'s order.
const NAMES: [(&str, Expected); 55] = [
    ("container_cpu_cfs_periods_total", Cadvisor),
    ("container_cpu_cfs_throttled_periods_total", Cadvisor),
    ("container_cpu_usage_seconds_total", Cadvisor),
    ("container_fs_reads_bytes_total", Conditional(BLOCK_IO)),
    ("container_fs_reads_total", Conditional(BLOCK_IO)),
    ("container_fs_writes_bytes_total", Conditional(BLOCK_IO)),
    ("container_fs_writes_total", Conditional(BLOCK_IO)),
    ("container_memory_cache", Cadvisor),
    ("container_memory_rss", Cadvisor),
    ("container_memory_swap", Cadvisor),
    ("container_memory_usage_bytes", Cadvisor),
    ("container_memory_working_set_bytes", Cadvisor),
    ("container_network_receive_bytes_total", Cadvisor),
    ("container_network_receive_packets_dropped_total", Cadvisor),
    ("container_network_receive_packets_total", Cadvisor),
    ("container_network_transmit_bytes_total", Cadvisor),
    ("container_network_transmit_packets_dropped_total", Cadvisor),
    ("container_network_transmit_packets_total", Cadvisor),
    ("go_goroutines", Left(NO_GO)),
    (
        "kubelet_certificate_manager_client_expiration_renew_errors",
        Conditional(CLIENT_ROTATION),
    ),
    (
        "kubelet_certificate_manager_client_ttl_seconds",
        Conditional(CLIENT_ROTATION),
    ),
    (
        "kubelet_certificate_manager_server_ttl_seconds",
        Conditional(SERVING_ROTATION),
    ),
    (
        "kubelet_cgroup_manager_duration_seconds_bucket",
        Left(NO_CGROUP_MANAGER),
    ),
    (
        "kubelet_cgroup_manager_duration_seconds_count",
        Left(NO_CGROUP_MANAGER),
    ),
    (
        "kubelet_evictions",
        Conditional(
            "a counter by eviction signal with no series before the first eviction, as the \
             kubelet's; this node evicts nothing (tests/it/eviction.rs evicts)",
        ),
    ),
    (
        "kubelet_node_config_error",
        Left(
            "gone from the kubelet with dynamic kubelet configuration (removed in 1.24); \
             kubelet 1.36 does not serve it either",
        ),
    ),
    ("kubelet_node_name", Kubelet),
    ("kubelet_pleg_relist_duration_seconds", Kubelet),
    ("kubelet_pleg_relist_duration_seconds_bucket", Kubelet),
    ("kubelet_pleg_relist_duration_seconds_count", Kubelet),
    ("kubelet_pleg_relist_interval_seconds_bucket", Kubelet),
    ("kubelet_pod_start_duration_seconds_bucket", Kubelet),
    ("kubelet_pod_start_duration_seconds_count", Kubelet),
    ("kubelet_pod_worker_duration_seconds_bucket", Kubelet),
    ("kubelet_pod_worker_duration_seconds_count", Kubelet),
    ("kubelet_running_containers", Kubelet),
    ("kubelet_running_pods", Kubelet),
    (
        "kubelet_runtime_operations_duration_seconds_bucket",
        Kubelet,
    ),
    (
        "kubelet_runtime_operations_errors_total",
        Conditional(
            "a counter by operation with no series before the first failed CRI call, as the \
             kubelet's; the runtime of this node fails none",
        ),
    ),
    ("kubelet_runtime_operations_total", Kubelet),
    (
        "kubelet_server_expiration_renew_errors",
        Conditional(SERVING_ROTATION),
    ),
    ("kubelet_volume_stats_available_bytes", Kubelet),
    ("kubelet_volume_stats_capacity_bytes", Kubelet),
    ("kubelet_volume_stats_inodes", Kubelet),
    ("kubelet_volume_stats_inodes_free", Kubelet),
    ("kubelet_volume_stats_inodes_used", Kubelet),
    ("kubelet_volume_stats_used_bytes", Kubelet),
    ("process_cpu_seconds_total", Kubelet),
    ("process_resident_memory_bytes", Kubelet),
    ("rest_client_request_duration_seconds_bucket", Kubelet),
    ("rest_client_requests_total", Kubelet),
    ("storage_operation_duration_seconds_bucket", Kubelet),
    ("storage_operation_duration_seconds_count", Kubelet),
    (
        "storage_operation_errors_total",
        Left(
            "gone from the kubelet: 1.36 counts a failed volume operation in \
             storage_operation_duration_seconds' status label, as nodepulse does",
        ),
    ),
    ("volume_manager_total_volumes", Kubelet),
];

/// Every name a scrape serves: the families (a histogram's own name too) and their samples'.
fn served(families: &BTreeMap<String, Family>) -> BTreeSet<String> {
    let samples = families
        .values()
        .flat_map(|family| family.samples.iter().map(|sample| sample.name.clone()));
    families.keys().cloned().chain(samples).collect()
}

#[actix_rt::test]
async fn every_name_a_stock_monitoring_stack_reads_is_served_or_has_its_reason() {
    let test = "every_name_a_stock_monitoring_stack_reads_is_served_or_has_its_reason";
    let sorted = NAMES.windows(2).all(|pair| pair[0].0 < pair[1].0);
    assert!(sorted, "the list's order, each name once");
    let Some(scene) = ClaimNode::start(test, "mixin").await else {
        return;
    };
    let node = &scene.node;
    let api = serve_with(node, &scene.cluster.kubeconfig, PERIOD).await;
    node.guard(async {
        // Beside the claim's pod, one under a CPU limit (the CFS families) that writes to the
        // disk (the block I/O families).
        let name = format!("{}-load", node.name);
        let write = "dd if=/dev/zero of=/scratch/fill bs=1M count=8 conv=fsync 2>/dev/null";
        let mut load = shell("load", &format!("{write}; {UNTIL_TERM}"));
        load["resources"] = json!({"limits": {"cpu": "500m"}});
        load["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
        let spec = json!({"spec": {
            "restartPolicy": "Always",
            "containers": [load],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }});
        create_pod(&scene.cluster, &node.name, &name, spec).await;
        wait_running(&scene.cluster.client, NAMESPACE, &name).await;
        wait_running(&scene.cluster.client, NAMESPACE, &scene.pod).await;
        let scrape = |path: &'static str| {
            let client = &api.client;
            async move {
                let answer = client.get(path).await;
                assert_eq!(answer.status, 200, "{path}: {}", answer.body);
                served(&parse(&answer.body))
            }
        };
        let missing = |cadvisor: &BTreeSet<String>, kubelet: &BTreeSet<String>| {
            (NAMES.iter())
                .filter(|(name, expected)| match expected {
                    Cadvisor => !cadvisor.contains(*name),
                    Kubelet => !kubelet.contains(*name),
                    Left(_) | Conditional(_) => false,
                })
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
        };
        // The pod's figures come with the next collection, the claim's with the next period.
        eventually_async("every name expected is served", || async {
            let (cadvisor, kubelet) = (scrape("/metrics/cadvisor").await, scrape("/metrics").await);
            let missing = missing(&cadvisor, &kubelet);
            // Said on each try: a timeout then shows what stayed missing.
            eprintln!("not served yet: {missing:?}");
            missing.is_empty()
        })
        .await;
        let (cadvisor, kubelet) = (scrape("/metrics/cadvisor").await, scrape("/metrics").await);
        assert_eq!(missing(&cadvisor, &kubelet), Vec::<&str>::new());
        for (name, expected) in NAMES {
            if let Left(reason) | Conditional(reason) = expected {
                assert!(!reason.is_empty(), "{name}");
            }
            if let Left(reason) = expected {
                // A name left out for good and served anyway means the reason is stale.
                let anywhere = cadvisor.contains(name) || kubelet.contains(name);
                assert!(
                    !anywhere,
                    "{name} is served: its reason ({reason}) is stale"
                );
            }
        }
    })
    .await;
    api.served.stop();
}
