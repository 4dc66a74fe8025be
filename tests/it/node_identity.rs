//! nodepulse needs no more than a node's own identity: under the emulator's node-restriction
//! mode (the Node authorizer and NodeRestriction admission), with a `system:node:<name>` token,
//! it registers its Node, keeps its status and renews its Lease — and the same identity is
//! refused another node's objects, so the test would notice nodepulse reaching beyond its own.

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, api::PostParams};
use nodepulse_testkit::{
    eventually_async,
    identity::{NodeIdentityEmulator, client},
    node::{healthy_runtime, start_api_actors},
};

#[actix_rt::test]
async fn a_node_identity_is_enough_and_reaches_only_its_own_objects() {
    let name = "identity-node";
    let cluster = NodeIdentityEmulator::start(name).await;
    let (node_kubeconfig, admin) = (&cluster.node_kubeconfig, &cluster.admin);

    let yaml = "nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";
    let (_supervisor, addresses) = start_api_actors(node_kubeconfig, name, yaml).await;
    addresses
        .node_status
        .try_send(healthy_runtime())
        .expect("queued");

    let nodes = Api::<Node>::all(admin.clone());
    eventually_async("Ready=True under the node identity", || async {
        nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|node| node.status?.conditions)
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    })
    .await;
    let leases = Api::<Lease>::namespaced(admin.clone(), "kube-node-lease");
    eventually_async("the lease renewed under the node identity", || async {
        leases
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|lease| lease.metadata.owner_references.is_some())
    })
    .await;

    // The same credentials cannot touch another node: the restriction is real.
    let as_node = Api::<Node>::all(client(node_kubeconfig).await);
    let other: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "someone-else"}}))
            .expect("node");
    assert!(
        as_node
            .create(&PostParams::default(), &other)
            .await
            .is_err(),
        "a node identity may not create another Node"
    );
}
