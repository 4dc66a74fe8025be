//! The suite's own clean-up (tests/it/common/cleanup.rs), against the emulator or a real cluster:
//! a test that fails still deletes what it made, pods bound to a node without an agent
//! included, and the leftover check sees what is left.

use crate::common;

use common::{
    cleanup::{self, Cleanup, Owned},
    cluster::{TestCluster, unique_node_name},
    pods::pod_manifest,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use kube::{Api, api::PostParams};
use serde_json::json;

async fn create_node_and_lease(client: &kube::Client, name: &str) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {cleanup::RUN_LABEL: cleanup::run_id()}}
    }))
    .expect("a node");
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("the node is created");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}
    }))
    .expect("a lease");
    Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .create(&PostParams::default(), &lease)
        .await
        .expect("the lease is created");
}

#[actix_rt::test]
async fn a_failing_test_still_deletes_its_node_lease_and_a_pod_no_agent_reports() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("cleanup-failing");
    let pod = format!("np-pod-{node}");
    create_node_and_lease(&cluster.client, &node).await;
    // A pod bound to a node no agent runs: only a forced (grace 0) delete removes it.
    Api::<Pod>::namespaced(cluster.client.clone(), "default")
        .create(
            &PostParams::default(),
            &pod_manifest(&pod, "default", &node, json!({})),
        )
        .await
        .expect("the pod is created");

    // The failing test, on its own thread (ownership is per test thread).
    let kubeconfig = cluster.kubeconfig.clone();
    let (node_owned, pod_owned) = (node.clone(), pod.clone());
    let failed = std::thread::spawn(move || {
        let _guard = Cleanup::new(&kubeconfig);
        cleanup::own_node(&node_owned);
        cleanup::own(Owned::Pod {
            namespace: "default".into(),
            name: pod_owned,
        });
        panic!("the test fails before its own clean-up");
    })
    .join();
    assert!(failed.is_err(), "the stand-in test failed");

    let owned = [
        Owned::Node(node.clone()),
        Owned::Pod {
            namespace: "default".into(),
            name: pod,
        },
    ];
    assert_eq!(
        cleanup::leftovers(&cluster.client, &owned).await,
        Vec::<String>::new()
    );
}

#[actix_rt::test]
async fn the_leftover_check_names_what_is_still_there() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("cleanup-left");
    create_node_and_lease(&cluster.client, &node).await;
    let owned = [Owned::Node(node.clone())];
    assert_eq!(
        cleanup::leftovers(&cluster.client, &owned).await,
        [
            format!("node {node}"),
            format!("lease kube-node-lease/{node}")
        ]
    );
    cleanup::delete_all(&cluster.client, &owned).await;
    assert_eq!(
        cleanup::leftovers(&cluster.client, &owned).await,
        Vec::<String>::new()
    );
}
