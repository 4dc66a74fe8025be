//! The kubelet's own `/metrics` on a node running a real pod (containerd): the families a
//! monitoring stack reads, with the kubelet 1.36's names, labels and histogram buckets, each
//! with its help and type and no series written twice. The recorded families are the test
//! process's (the kubelet's registry is process-wide too), so counts are checked as at least
//! what this node did; the node's name, its running pods and volumes are this node's own.

use std::collections::BTreeMap;

use serde_json::json;

use super::{
    cri_pods::{NAMESPACE, Setup, UNTIL_TERM, create_pod, shell},
    kubelet_api_logs::serve,
};
use nodepulse_testkit::{
    eventually_async,
    pods::wait_running,
    prometheus_text::{Family, Sample, parse, written_twice},
};

/// The samples named `name` whose labels include every pair of `wanted`.
fn samples<'a>(
    families: &'a BTreeMap<String, Family>,
    family: &str,
    name: &str,
    wanted: &[(&str, &str)],
) -> Vec<&'a Sample> {
    let Some(family) = families.get(family) else {
        return Vec::new();
    };
    (family.samples.iter())
        .filter(|sample| sample.name == name)
        .filter(|sample| {
            (wanted.iter())
                .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
        })
        .collect()
}

/// The one value of `name` with `wanted` labels.
fn value(
    families: &BTreeMap<String, Family>,
    family: &str,
    name: &str,
    wanted: &[(&str, &str)],
) -> Option<f64> {
    let found = samples(families, family, name, wanted);
    assert!(found.len() <= 1, "{name} {wanted:?}: {found:?}");
    found.first().map(|sample| sample.value)
}

/// A histogram's `le` bounds, in order, for the series with `wanted` labels.
fn bounds(
    families: &BTreeMap<String, Family>,
    family: &str,
    wanted: &[(&str, &str)],
) -> Vec<String> {
    let name = format!("{family}_bucket");
    (samples(families, family, &name, wanted).iter())
        .map(|sample| sample.labels["le"].clone())
        .collect()
}

#[actix_rt::test]
async fn the_kubelets_own_metrics_are_served_for_a_node_running_a_pod() {
    let test = "the_kubelets_own_metrics_are_served_for_a_node_running_a_pod";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "kmetrics").await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-app", node.name);
        let mut app = shell("app", UNTIL_TERM);
        app["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
        let spec = json!({"spec": {
            "restartPolicy": "Always",
            "containers": [app],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }});
        create_pod(&cluster, &node.name, &name, spec).await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let scrape = || async {
            let answer = api.client.get("/metrics").await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(
                answer.headers.get("content-type").expect("a content type"),
                "text/plain; version=0.0.4; charset=utf-8"
            );
            (answer.body.clone(), parse(&answer.body))
        };
        // The pod start is observed when its Running status is set, the PLEG relists on.
        eventually_async("the running pod is counted", || async {
            let families = scrape().await.1;
            value(
                &families,
                "kubelet_running_pods",
                "kubelet_running_pods",
                &[],
            ) >= Some(1.0)
        })
        .await;
        let (text, families) = scrape().await;
        assert_eq!(written_twice(&text), Vec::<String>::new());
        for (family, served) in &families {
            assert!(served.help.is_some() && served.kind.is_some(), "{family}");
        }
        let gauge =
            |family: &str, wanted: &[(&str, &str)]| value(&families, family, family, wanted);

        let node_name = [("node", node.name.as_str())];
        assert_eq!(gauge("kubelet_node_name", &node_name), Some(1.0));
        let running = [("container_state", "running")];
        assert!(gauge("kubelet_running_containers", &running) >= Some(1.0));

        // Histograms with the kubelet's buckets; counts of what this node did at least.
        let default_buckets = [
            "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf",
        ];
        for family in [
            "kubelet_pleg_relist_duration_seconds",
            "kubelet_pleg_relist_interval_seconds",
        ] {
            assert_eq!(bounds(&families, family, &[]), default_buckets, "{family}");
        }
        let count = |family: &str, wanted: &[(&str, &str)]| {
            value(&families, family, &format!("{family}_count"), wanted).unwrap_or(0.0)
        };
        assert!(count("kubelet_pleg_relist_duration_seconds", &[]) >= 1.0);
        let sync = [("operation_type", "sync")];
        assert!(count("kubelet_pod_worker_duration_seconds", &sync) >= 1.0);
        assert_eq!(
            bounds(&families, "kubelet_pod_worker_duration_seconds", &sync),
            default_buckets
        );
        assert!(count("kubelet_pod_start_duration_seconds", &[]) >= 1.0);
        let start_bounds = bounds(&families, "kubelet_pod_start_duration_seconds", &[]);
        assert_eq!(
            (start_bounds.first().map(String::as_str), start_bounds.len()),
            (Some("0.5"), 26),
            "podStartupDurationBuckets and +Inf"
        );

        // Every CRI call, by the kubelet's operation name.
        let sandbox = [("operation_type", "run_podsandbox")];
        assert!(gauge("kubelet_runtime_operations_total", &sandbox) >= Some(1.0));
        let runtime_bounds = bounds(
            &families,
            "kubelet_runtime_operations_duration_seconds",
            &sandbox,
        );
        assert_eq!(
            (
                runtime_bounds.first().map(String::as_str),
                runtime_bounds.len()
            ),
            (Some("0.005"), 15),
            "ExponentialBuckets(.005, 2.5, 14) and +Inf"
        );

        // The volume manager's volumes and their SetUp.
        let empty_dir = "kubernetes.io/empty-dir";
        for state in ["actual_state_of_world", "desired_state_of_world"] {
            let labels = [("plugin_name", empty_dir), ("state", state)];
            assert!(
                gauge("volume_manager_total_volumes", &labels) >= Some(1.0),
                "{state}"
            );
        }
        let mount = [
            ("volume_plugin", empty_dir),
            ("operation_name", "volume_mount"),
            ("status", "success"),
            ("migrated", "false"),
        ];
        assert!(count("storage_operation_duration_seconds", &mount) >= 1.0);

        // The API client's requests, by method and the server's host.
        let requests = samples(
            &families,
            "rest_client_requests_total",
            "rest_client_requests_total",
            &[],
        );
        assert!(
            requests
                .iter()
                .any(|sample| sample.labels["method"] == "PATCH"
                    && !sample.labels["host"].is_empty()
                    && sample.labels["code"] == "200"),
            "{requests:?}"
        );
        let patches = samples(
            &families,
            "rest_client_request_duration_seconds",
            "rest_client_request_duration_seconds_count",
            &[("verb", "PATCH")],
        );
        assert!(
            patches.iter().any(|sample| sample.value >= 1.0),
            "{patches:?}"
        );
        assert!(gauge("process_cpu_seconds_total", &[]) > Some(0.0));
        assert!(gauge("process_resident_memory_bytes", &[]) > Some(0.0));
    })
    .await;
    api.served.stop();
}
