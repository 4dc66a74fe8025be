//! CSI driver registration end to end: the test CSI plugin opens its registration socket in
//! `<rootDir>/plugins_registry`, the plugin watcher (started in-process, on the kube-rs adapter)
//! registers it, and the API server then has the driver in the node's CSINode (owned by the
//! Node) and its node ID in the Node's annotation; removing the socket deregisters it. Runs
//! unchanged against a real cluster: the Node and driver names are the test's own.

use std::{path::Path, sync::Arc};

use k8s_openapi::api::{core::v1::Node, storage::v1::CSINode};
use kube::Api;
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Source},
    volume_plugins::{
        csi::{CsiDrivers, CsiRegistrationHandler},
        plugin_watcher::PluginWatcher,
    },
};
use nodepulse_actors::ports::NODE_ID_ANNOTATION;
use tokio::task::JoinHandle;

use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    csi_plugin::{CsiPlugin, PluginOptions},
    eventually, eventually_async, storage,
};

/// The watcher task, stopped when the test ends, passing or failing.
struct Watching {
    task: JoinHandle<()>,
    drivers: CsiDrivers,
    registry: std::path::PathBuf,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn watch(cluster: &TestCluster, node: &str, root: &Path) -> Watching {
    let config = Config::parse("kubeAPIQPS: 50\nkubeAPIBurst: 100\n", Source::Embedded)
        .expect("a valid configuration");
    let api = KubeApi::connect(Some(&cluster.kubeconfig), &config)
        .await
        .expect("connects");
    let drivers = CsiDrivers::default();
    let handler = CsiRegistrationHandler::new(node, drivers.clone(), api as Arc<_>);
    let watcher = PluginWatcher::new(root, handler);
    watcher.ensure_registry().expect("plugins_registry");
    let registry = watcher.registry().to_path_buf();
    let task = tokio::spawn(watcher.run(std::future::pending()));
    Watching {
        task,
        drivers,
        registry,
    }
}

fn driver_name(node: &str) -> String {
    format!("{node}.csi.nodepulse.test")
}

async fn read_csi_node(cluster: &TestCluster, node: &str) -> Option<CSINode> {
    Api::<CSINode>::all(cluster.client.clone())
        .get_opt(node)
        .await
        .expect("CSINode read")
}

async fn node_id_annotation(cluster: &TestCluster, node: &str) -> Option<String> {
    Api::<Node>::all(cluster.client.clone())
        .get(node)
        .await
        .expect("Node read")
        .metadata
        .annotations
        .and_then(|annotations| annotations.get(NODE_ID_ANNOTATION).cloned())
}

#[tokio::test]
async fn a_registered_driver_lands_in_csinode_and_the_node_annotation_until_its_socket_goes() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("csi-reg");
    let node_uid = cluster.create_node(&node).await;
    storage::own_csi_node(&node);
    let root = tempfile::tempdir().expect("root dir");
    let watching = watch(&cluster, &node, root.path()).await;
    let driver = driver_name(&node);
    let options = PluginOptions {
        max_volumes_per_node: 8,
        ..PluginOptions::new(&driver)
    };
    let mut plugin = CsiPlugin::start(
        options.clone(),
        &root.path().join("plugins").join(&driver).join("csi.sock"),
    );
    plugin.register_in(&watching.registry);

    eventually_async("CSINode lists the driver", || async {
        read_csi_node(&cluster, &node)
            .await
            .is_some_and(|csi_node| {
                csi_node
                    .spec
                    .drivers
                    .iter()
                    .any(|entry| entry.name == driver)
            })
    })
    .await;
    let csi_node = read_csi_node(&cluster, &node).await.expect("CSINode");
    let entry = csi_node
        .spec
        .drivers
        .iter()
        .find(|entry| entry.name == driver)
        .expect("the driver's entry");
    assert_eq!(entry.node_id, options.node_id);
    assert_eq!(
        entry.topology_keys.as_deref(),
        Some(&["topology.example.com/zone".to_owned()][..])
    );
    assert_eq!(entry.allocatable.as_ref().and_then(|a| a.count), Some(8));
    let owner = &csi_node.metadata.owner_references.expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Node", node.as_str(), node_uid.as_str())
    );

    let annotation = node_id_annotation(&cluster, &node)
        .await
        .expect("annotated");
    let map: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&annotation).expect("a JSON map");
    assert_eq!(map.get(&driver), Some(&options.node_id));
    let labels = Api::<Node>::all(cluster.client.clone())
        .get(&node)
        .await
        .expect("Node")
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(
        labels.get("topology.example.com/zone").map(String::as_str),
        Some("z1")
    );
    eventually("the plugin is told it is registered", || {
        plugin
            .registration_statuses()
            .iter()
            .any(|status| status.plugin_registered && status.error.is_empty())
    })
    .await;
    assert_eq!(
        watching
            .drivers
            .get(&driver)
            .map(|registered| registered.endpoint),
        Some(plugin.endpoint.display().to_string())
    );

    plugin.unregister();
    eventually_async("the driver leaves CSINode and the annotation", || async {
        let gone_from_csi_node = read_csi_node(&cluster, &node).await.is_none_or(|csi_node| {
            csi_node
                .spec
                .drivers
                .iter()
                .all(|entry| entry.name != driver)
        });
        gone_from_csi_node && node_id_annotation(&cluster, &node).await.is_none()
    })
    .await;
    assert_eq!(watching.drivers.get(&driver), None);
}

#[tokio::test]
async fn a_plugin_offering_no_supported_version_is_told_why_and_writes_nothing() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("csi-ver");
    cluster.create_node(&node).await;
    // Should a regression write one anyway, it is deleted with the test.
    storage::own_csi_node(&node);
    let root = tempfile::tempdir().expect("root dir");
    let watching = watch(&cluster, &node, root.path()).await;
    let driver = driver_name(&node);
    let options = PluginOptions {
        supported_versions: vec!["2.0.0".to_owned()],
        ..PluginOptions::new(&driver)
    };
    let mut plugin = CsiPlugin::start(
        options,
        &root.path().join("plugins").join(&driver).join("csi.sock"),
    );
    plugin.register_in(&watching.registry);

    eventually("the plugin is told why it is not registered", || {
        !plugin.registration_statuses().is_empty()
    })
    .await;
    let status = &plugin.registration_statuses()[0];
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        format!(
            "RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver {driver} at endpoint {}: kubernetes.io/csi: ValidatePlugin for CSI driver {driver:?} failed. None of the versions specified [\"2.0.0\"] are supported. err=could not find a highest supported version from versions (2.0.0) reported by this driver",
            plugin.endpoint.display()
        )
    );
    assert!(
        read_csi_node(&cluster, &node).await.is_none(),
        "no CSINode written"
    );
    assert_eq!(node_id_annotation(&cluster, &node).await, None);
    assert!(watching.drivers.names().is_empty());
}

#[tokio::test]
async fn a_csinode_left_by_an_earlier_node_of_the_same_name_is_made_afresh() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("csi-stale");
    let node_uid = cluster.create_node(&node).await;
    storage::own_csi_node(&node);
    let stale: CSINode = serde_json::from_value(serde_json::json!({
        "metadata": {"name": node, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": "0d1e5a1e-0000-4000-8000-000000000000"}]},
        "spec": {"drivers": [{"name": "old.csi.nodepulse.test", "nodeID": "old"}]},
    }))
    .expect("a CSINode");
    Api::<CSINode>::all(cluster.client.clone())
        .create(&kube::api::PostParams::default(), &stale)
        .await
        .expect("the stale CSINode is created");
    let root = tempfile::tempdir().expect("root dir");
    let watching = watch(&cluster, &node, root.path()).await;
    let driver = driver_name(&node);
    let mut plugin = CsiPlugin::start(
        PluginOptions::new(&driver),
        &root.path().join("plugins").join(&driver).join("csi.sock"),
    );
    plugin.register_in(&watching.registry);

    eventually_async(
        "CSINode belongs to this Node and lists only its driver",
        || async {
            read_csi_node(&cluster, &node)
                .await
                .is_some_and(|csi_node| {
                    let owners = csi_node.metadata.owner_references.unwrap_or_default();
                    let drivers: Vec<String> =
                        csi_node.spec.drivers.into_iter().map(|d| d.name).collect();
                    owners.len() == 1 && owners[0].uid == node_uid && drivers == [driver.clone()]
                })
        },
    )
    .await;
}
