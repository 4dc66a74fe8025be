//! `kubelet_volume_stats_*` for a claim a real container (containerd) mounts, published by the
//! test CSI plugin: the claim's filesystem figures with the kubelet's labels, consistent with
//! each other, and its used bytes following a file the container writes into it within a
//! `volumeStatsAggPeriod` (1 s here). [`ClaimNode`] is the scene the monitoring test reuses.

use std::{collections::BTreeMap, time::Duration};

use nodepulse_actors::ports::ContainerRuntime;
use serde_json::json;

use super::{
    cri_pods::{NAMESPACE, UNTIL_TERM, create_pod, runtime_id, shell},
    kubelet_api_logs::{Api, serve_with},
};
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    cri_fixture::CriFixture,
    cri_node::CriNode,
    csi_plugin::{CsiPlugin, PluginOptions},
    eventually_async,
    pods::wait_running,
    prometheus_text::{Family, parse},
    storage::{create_bound_claim, create_csi_driver, own_csi_node},
};

/// A CRI node whose CSI driver (the test plugin) publishes a bound claim, and a running pod
/// that mounts it at `/data`; dropped in this order, so the sandboxes go while containerd runs.
pub(crate) struct ClaimNode {
    pub(crate) node: CriNode,
    _plugin: CsiPlugin,
    pub(crate) fixture: CriFixture,
    pub(crate) cluster: TestCluster,
    pub(crate) claim: String,
    pub(crate) pod: String,
}

impl ClaimNode {
    /// `None` (skip) where containerd is missing, outside CI only.
    pub(crate) async fn start(test: &str, prefix: &str) -> Option<Self> {
        CriFixture::required(test)?;
        let cluster = TestCluster::start().await;
        let fixture = CriFixture::start(prefix).await;
        let driver = format!("{}.csi.nodepulse.test", unique_node_name(prefix));
        let mut plugin = None;
        let node = CriNode::start_with(&cluster.kubeconfig, &fixture, prefix, |dir| {
            let mut started = CsiPlugin::start(
                PluginOptions::new(&driver),
                &dir.join("csi-plugin/csi.sock"),
            );
            // The node's rootDir (`cri_node_config`).
            started.register_in(&dir.join("root/plugins_registry"));
            plugin = Some(started);
            String::new()
        })
        .await;
        own_csi_node(&node.name);
        let (claim, pv, handle, pod) = (
            format!("{}-data", node.name),
            format!("{}-pv", node.name),
            format!("{}-handle", node.name),
            format!("{}-app", node.name),
        );
        create_csi_driver(&cluster.client, &driver, false).await;
        create_bound_claim(&cluster.client, NAMESPACE, &claim, &pv, &driver, &handle).await;
        let mut app = shell("app", UNTIL_TERM);
        app["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        let spec = json!({"spec": {
            "restartPolicy": "Always",
            "containers": [app],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        }});
        create_pod(&cluster, &node.name, &pod, spec).await;
        Some(Self {
            node,
            _plugin: plugin.expect("the plugin started"),
            fixture,
            cluster,
            claim,
            pod,
        })
    }
}

/// The claim's figure `family`, if served.
fn figure(families: &BTreeMap<String, Family>, family: &str, claim: &str) -> Option<f64> {
    let samples = &families.get(family)?.samples;
    let mut found = samples.iter().filter(|sample| {
        sample
            .labels
            .get("persistentvolumeclaim")
            .map(String::as_str)
            == Some(claim)
            && sample.labels.get("namespace").map(String::as_str) == Some(NAMESPACE)
    });
    let value = found.next()?.value;
    assert!(found.next().is_none(), "{family}: the claim twice");
    Some(value)
}

async fn scrape(api: &Api) -> BTreeMap<String, Family> {
    let answer = api.client.get("/metrics").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    parse(&answer.body)
}

/// The kubelet API's measuring period.
pub(crate) const PERIOD: &str = "volumeStatsAggPeriod: 1s\n";

/// What the container writes into the claim.
const WRITTEN: f64 = 64.0 * 1024.0 * 1024.0;

#[actix_rt::test]
async fn a_mounted_claims_volume_stats_follow_a_file_written_into_it() {
    let test = "a_mounted_claims_volume_stats_follow_a_file_written_into_it";
    let Some(scene) = ClaimNode::start(test, "volstats").await else {
        return;
    };
    let (node, claim) = (&scene.node, scene.claim.as_str());
    let api = serve_with(node, &scene.cluster.kubeconfig, PERIOD).await;
    node.guard(async {
        let pod = wait_running(&scene.cluster.client, NAMESPACE, &scene.pod).await;
        eventually_async("the claim's figures are served", || async {
            figure(
                &scrape(&api).await,
                "kubelet_volume_stats_used_bytes",
                claim,
            )
            .is_some()
        })
        .await;
        let families = scrape(&api).await;
        let value = |family: &str| figure(&families, family, claim).expect(family);
        let (capacity, available, used) = (
            value("kubelet_volume_stats_capacity_bytes"),
            value("kubelet_volume_stats_available_bytes"),
            value("kubelet_volume_stats_used_bytes"),
        );
        assert!(
            capacity > 0.0 && available + used <= capacity,
            "{capacity} {available} {used}"
        );
        let (inodes, free, inodes_used) = (
            value("kubelet_volume_stats_inodes"),
            value("kubelet_volume_stats_inodes_free"),
            value("kubelet_volume_stats_inodes_used"),
        );
        assert_eq!(free + inodes_used, inodes);
        for family in families
            .keys()
            .filter(|name| name.starts_with("kubelet_volume_stats_"))
        {
            let served = &families[family];
            assert_eq!(served.kind.as_deref(), Some("gauge"), "{family}");
        }

        let container = pod
            .status
            .as_ref()
            .and_then(|status| status.container_statuses.as_ref());
        let id = runtime_id(&container.expect("statuses")[0]);
        let write = "dd if=/dev/zero of=/data/fill bs=1M count=64 conv=fsync 2>/dev/null";
        let command = vec!["/bin/sh".into(), "-c".into(), write.into()];
        let written = scene
            .fixture
            .client
            .exec_sync(id, command, Duration::from_secs(60));
        let output = written.await.expect("ExecSync");
        assert_eq!(output.exit_code, 0, "{output:?}");
        eventually_async("the claim's used bytes grow by the file", || async {
            let now = figure(
                &scrape(&api).await,
                "kubelet_volume_stats_used_bytes",
                claim,
            );
            now.is_some_and(|now| now >= used + 0.75 * WRITTEN)
        })
        .await;
    })
    .await;
    api.served.stop();
}
