//! The CRI provider's figures, on a private containerd (the test fixtures') and the API
//! emulator: pod bound → Running and Ready in the API with the image present, one pod at a
//! time, and 30 pods bound together (`cargo run --profile ship --example cri_pods_start`); with
//! `-- steady`, the CPU and memory of the nodepulse daemon (the ship binary beside this
//! example) running 30 pods, over 60 s. Needs containerd, runc, the CNI plugins and
//! busybox-static (`scripts/ci-setup-containerd.sh`).

// Not `examples/steady.rs`: Cargo would take that for an example of its own.
#[path = "cri_pods_start/steady.rs"]
mod steady;

use std::time::{Duration, Instant};

use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    oci_image::BUSYBOX_IMAGE,
    pods::{create, pod_manifest, running_and_ready, wait_pod},
};
use serde_json::json;

const SEQUENTIAL: usize = 10;
const TOGETHER: usize = 30;
const UNTIL_TERM: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

fn manifest(name: &str, node: &str) -> k8s_openapi::api::core::v1::Pod {
    let container =
        json!({"name": "app", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", UNTIL_TERM]});
    pod_manifest(
        name,
        "default",
        node,
        json!({"spec": {"containers": [container]}}),
    )
}

/// Creates the pod and waits until the API shows it Running and Ready; how long that took.
async fn bound_to_running(client: &kube::Client, name: &str, node: &str) -> Duration {
    let started = Instant::now();
    create(client, &manifest(name, node)).await;
    wait_pod(
        client,
        "default",
        name,
        "Running and Ready",
        running_and_ready,
    )
    .await;
    started.elapsed()
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e4).round() / 10.0
}

#[actix_rt::main]
async fn main() {
    if CriFixture::required("cri_pods_start").is_none() {
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("steady") {
        steady::run().await;
        return;
    }
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-bench").await;
    let node = CriNode::start(&cluster.kubeconfig, &fixture, "cri-bench").await;
    node.guard(async {
        let client = &cluster.client;
        // The first pod also pays for the first connection to containerd: left out.
        bound_to_running(client, &format!("{}-warm", node.name), &node.name).await;
        let mut one_by_one = Vec::new();
        for i in 0..SEQUENTIAL {
            let name = format!("{}-one-{i}", node.name);
            one_by_one.push(bound_to_running(client, &name, &node.name).await);
        }
        one_by_one.sort();

        let started = Instant::now();
        let names: Vec<String> = (0..TOGETHER)
            .map(|i| format!("{}-many-{i}", node.name))
            .collect();
        let mut together: Vec<Duration> = futures::future::join_all(
            names
                .iter()
                .map(|name| bound_to_running(client, name, &node.name)),
        )
        .await;
        let all = started.elapsed();
        together.sort();
        let figures = json!({
            "boundToRunningMs": {
                "samples": SEQUENTIAL,
                "p50": millis(one_by_one[SEQUENTIAL / 2]),
                "max": millis(one_by_one[SEQUENTIAL - 1]),
            },
            "podsTogether": {
                "pods": TOGETHER,
                "allRunningMs": millis(all),
                "p50Ms": millis(together[TOGETHER / 2]),
            },
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&figures).unwrap_or_default()
        );
    })
    .await;
}
