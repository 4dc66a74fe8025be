//! Issue 25: the CRI engine's health reaches Ready as the kubelet's runtime state does. A
//! runtime that hangs (containerd under SIGSTOP) leaves the PLEG without a relist: past
//! `plegRelistThreshold` the node is NotReady with the kubelet's `PLEG is not healthy: pleg was
//! last seen active … ago; threshold is …`, and Ready again once containerd answers. A pod
//! provider that cannot start keeps the node NotReady, saying why, until a retry starts it.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    eventually_async,
    pods::{running_and_ready, wait_pod},
};
use serde_json::json;

use crate::cri_pods::{UNTIL_TERM, create_pod, shell, spec};

const NAMESPACE: &str = "default";

/// The Node's Ready condition as (status, message).
async fn ready(cluster: &TestCluster, node: &str) -> Option<(String, String)> {
    let node = Api::<Node>::all(cluster.client.clone())
        .get_opt(node)
        .await
        .ok()??;
    node.status?
        .conditions?
        .into_iter()
        .find(|condition| condition.type_ == "Ready")
        .map(|condition| (condition.status, condition.message.unwrap_or_default()))
}

async fn wait_ready(
    cluster: &TestCluster,
    node: &str,
    what: &str,
    check: impl Fn(&str, &str) -> bool,
) {
    eventually_async(&format!("{node}: {what}"), || async {
        ready(cluster, node)
            .await
            .is_some_and(|(status, message)| check(&status, &message))
    })
    .await;
}

/// The threshold is shortened by configuration (`plegRelistThreshold: 5s`; the kubelet's is
/// 3 min).
#[actix_rt::test]
async fn a_hung_runtime_makes_the_pleg_unhealthy_and_the_node_not_ready_until_it_answers() {
    let test = "a_hung_runtime_makes_the_pleg_unhealthy_and_the_node_not_ready_until_it_answers";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-pleg-health").await;
    let node = CriNode::start_with(&cluster.kubeconfig, &fixture, "cri-pleg-health", |_| {
        "plegRelistThreshold: 5s\n".to_owned()
    })
    .await;
    node.guard(async {
        // The PLEG relists while the node has a pod.
        let name = format!("{}-app", node.name);
        let manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
        create_pod(&cluster, &node.name, &name, manifest).await;
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
        wait_ready(&cluster, &node.name, "Ready", |status, _| status == "True").await;

        let paused = fixture.containerd.pause();
        wait_ready(
            &cluster,
            &node.name,
            "NotReady with the PLEG's message",
            |status, message| {
                status == "False"
                    && message.contains("PLEG is not healthy: pleg was last seen active ")
                    && message.contains(" ago; threshold is 5s")
            },
        )
        .await;

        drop(paused);
        wait_ready(
            &cluster,
            &node.name,
            "Ready once containerd answers",
            |status, _| status == "True",
        )
        .await;
    })
    .await;
}

/// A CRI node whose pod provider cannot start (its `podLogsDir` is a regular file, so the
/// kubelet's pod logs root directory cannot be made) is NotReady and says why, in Ready and in
/// `/debug/node`; once the directory can be made, the retried start works, the node is Ready,
/// and the pod bound to it meanwhile runs.
#[actix_rt::test]
async fn a_cri_provider_that_cannot_start_keeps_the_node_not_ready_saying_why_until_it_starts() {
    let test =
        "a_cri_provider_that_cannot_start_keeps_the_node_not_ready_saying_why_until_it_starts";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-no-start").await;
    let node = CriNode::start_with(&cluster.kubeconfig, &fixture, "cri-no-start", |dir| {
        std::fs::write(dir.join("logs"), "not a directory").expect("a file where podLogsDir goes");
        String::new()
    })
    .await;
    let logs = node.root_dir().with_file_name("logs");
    let why = format!(
        "CRI pod provider is not healthy: cannot start: error creating pod logs root directory {logs:?}"
    );
    node.guard(async {
        wait_ready(
            &cluster,
            &node.name,
            "NotReady saying why",
            |status, message| status == "False" && message.contains(&why),
        )
        .await;
        // As the status last computed, which follows the registration's.
        eventually_async("/debug/node shows why Ready is False", || async {
            let debug = node
                .supervisor
                .actor_state(
                    nodepulse_actors::node_status::NAME,
                    std::time::Duration::from_secs(5),
                )
                .await
                .expect("the node status actor's state");
            debug["conditions"]
                .as_array()
                .and_then(|all| all.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|ready| {
                    ready["decidedBy"]["healthChecks"]
                        .to_string()
                        .contains("error creating pod logs root directory")
                })
        })
        .await;

        let name = format!("{}-waits", node.name);
        let manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
        create_pod(&cluster, &node.name, &name, manifest).await;
        std::fs::remove_file(&logs).expect("the file goes");
        wait_ready(
            &cluster,
            &node.name,
            "Ready once the provider started",
            |status, _| status == "True",
        )
        .await;
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
    })
    .await;
}
