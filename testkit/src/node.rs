//! Starting one node's API-facing actors (NodeStatus + Lease) against a test cluster, with the
//! test playing the runtime probe and the eviction signal.

use std::{path::Path, sync::Arc};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodepulse::{
    apiserver_client::{KubeApi, node::is_ready},
    config::{Config, Settings, Source},
    node::{NodeActors, NodeAddresses, Parts},
};
use nodepulse_actors::{messages::RuntimeHealth, runtime_probe::UpdatePodCidr};
use nodepulse_supervisor::{Recipient, SupervisorHandle};

use crate::cleanup::{RUN_LABEL, own_node, run_id};
use crate::eventually_async;

/// Starts NodeStatus and Lease for node `name` with the configuration `yaml`, through
/// `kubeconfig`; the returned addresses are how the test feeds NodeStatus.
pub async fn start_api_actors(
    kubeconfig: &Path,
    name: &str,
    yaml: &str,
) -> (SupervisorHandle, NodeAddresses) {
    start_api_actors_with(kubeconfig, name, yaml, None).await
}

/// [`start_api_actors`], with somewhere for NodeStatus to push pod CIDRs.
pub async fn start_api_actors_with(
    kubeconfig: &Path,
    name: &str,
    yaml: &str,
    pod_cidr: Option<Recipient<UpdatePodCidr>>,
) -> (SupervisorHandle, NodeAddresses) {
    let (settings, api) = connect(kubeconfig, name, yaml).await;
    let node = NodeActors::new(&settings).api(api).parts(Parts::HEARTBEAT);
    let node = match pod_cidr {
        Some(pod_cidr) => node.push_pod_cidr_to(pod_cidr),
        None => node,
    };
    let node = node.start().expect("NodeStatus and Lease are wired");
    (node.supervisor, node.addresses)
}

/// The settings of node `name` with the configuration `yaml`, and an API client for them.
pub async fn connect(kubeconfig: &Path, name: &str, yaml: &str) -> (Settings, Arc<KubeApi>) {
    let mut config = Config::parse(yaml, Source::Embedded).expect("valid test configuration");
    // A cgroup root of the test's own, removed with its rootDir (`test_cgroups`).
    if config.cgroup_root.is_none() && config.cgroups_per_qos {
        let root = crate::test_cgroups::cgroup_root_for(&config.root_dir);
        crate::test_cgroups::make_root(&root);
        config.cgroup_root = Some(root);
    }
    config
        .node_labels
        .insert(RUN_LABEL.to_owned(), run_id().to_owned());
    own_node(name);
    let settings = Settings {
        config,
        node_name: name.to_owned(),
        kubeconfig: Some(kubeconfig.to_owned()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config)
        .await
        .expect("connects");
    (settings, api)
}

/// What RuntimeProbe says of a healthy runtime that just answered.
pub fn healthy_runtime() -> RuntimeHealth {
    RuntimeHealth {
        last_successful_probe: Some(tokio::time::Instant::now()),
        runtime_error: None,
        network_error: None,
        runtime_version: Some("containerd://1.6.20".into()),
        observed_at: jiff::Timestamp::now(),
        simulated: true,
        images: Vec::new(),
        capabilities: Default::default(),
    }
}

/// Reports a healthy runtime to NodeStatus and waits until the API shows the Node Ready=True;
/// returns the Node as the API has it then.
pub async fn report_healthy_and_wait_ready(
    client: &kube::Client,
    name: &str,
    addresses: &NodeAddresses,
) -> Node {
    addresses
        .node_status
        .try_send(healthy_runtime())
        .expect("queued");
    let nodes = Api::<Node>::all(client.clone());
    eventually_async("the Node is Ready=True", || async {
        nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| is_ready(&node))
    })
    .await;
    nodes.get(name).await.expect("the Node")
}
