//! The prober's figures, on a private containerd (the test fixtures') and the API emulator:
//! a readiness file made to appear just before a probe → `Ready=True` seen in a watch, timed
//! from the probe's start (its `nextRun` in `/debug/probes`; p50/p90), and the process's CPU over 60 s with 100 tcpSocket
//! readiness workers at a 1 s period against the same 100 containers without probes.
//! `cargo run --profile ship --example probes_bench`; needs what `cri_pods_start` needs.

use nodepulse_testkit::{PATIENCE, eventually_async};

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, WatchEvent, WatchParams},
};
use nodepulse_actors::ports::ContainerRuntime;
use serde_json::{Value, json};

use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    oci_image::BUSYBOX_IMAGE,
    pods::{condition, create, pod_manifest, running_and_ready, wait_pod},
};

const SAMPLES: usize = 20;
const PODS: usize = 20;
const CONTAINERS_PER_POD: usize = 5;
const MEASURED: Duration = Duration::from_secs(60);
const UNTIL_TERM: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

fn container(name: &str, script: &str, probe: Option<Value>) -> Value {
    let mut container =
        json!({"name": name, "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", script]});
    if let Some(probe) = probe {
        container["readinessProbe"] = probe;
    }
    container
}

/// One pod of `CONTAINERS_PER_POD` containers, each serving its own port (8080 + i), each
/// probed on it over TCP every second when `probed`.
fn serving_pod(name: &str, node: &str, probed: bool) -> Pod {
    let containers: Vec<Value> = (0..CONTAINERS_PER_POD)
        .map(|i| {
            let port = 8080 + i;
            let script = format!("busybox httpd -p {port} -h /tmp; {UNTIL_TERM}");
            let probe = probed.then(|| json!({"tcpSocket": {"port": port}, "periodSeconds": 1}));
            container(&format!("c{i}"), &script, probe)
        })
        .collect();
    pod_manifest(
        name,
        "default",
        node,
        json!({"spec": {"terminationGracePeriodSeconds": 2, "containers": containers}}),
    )
}

fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").as_deref() == Some("True")
}

/// Runs `command` in the pod's first container through the fixture's CRI client.
async fn exec(fixture: &CriFixture, pod: &Pod, command: &[&str]) {
    let id = (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref()?.first()?.container_id.clone())
        .expect("a container ID");
    let id = id.split_once("://").map_or(id.as_str(), |(_, id)| id);
    let command = command.iter().map(|s| (*s).to_owned()).collect();
    let output = fixture
        .client
        .exec_sync(id.to_owned(), command, Duration::from_secs(10))
        .await
        .expect("ExecSync");
    assert_eq!(output.exit_code, 0);
}

/// A watch on the pod from its current version.
async fn watch(api: &Api<Pod>, name: &str) -> BoxStream<'static, kube::Result<WatchEvent<Pod>>> {
    let current = api.get(name).await.expect("the pod");
    let version = current
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    api.watch(&params, &version).await.expect("a watch").boxed()
}

/// Waits until the watch shows the pod's Ready as `ready`; the wall time it did.
async fn seen(
    watch: &mut BoxStream<'static, kube::Result<WatchEvent<Pod>>>,
    ready: bool,
) -> Timestamp {
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = watch.try_next().await.expect("watch") {
            if let WatchEvent::Modified(pod) = event
                && is_ready(&pod) == ready
            {
                return Timestamp::now();
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("Ready changed within the patience")
}

/// When the prober next probes the pod's readiness (its `/debug/probes` view).
async fn next_probe(node: &CriNode, pod: &Pod) -> Timestamp {
    let state = node
        .supervisor
        .actor_state(nodepulse_actors::prober::NAME, Duration::from_secs(2))
        .await
        .expect("the prober's state");
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let worker = (state["workers"].as_array().expect("workers").iter())
        .find(|w| w["podUID"] == uid && w["kind"] == "Readiness")
        .expect("the readiness worker");
    worker["nextRun"]
        .as_str()
        .expect("nextRun")
        .parse()
        .expect("a timestamp")
}

/// The readiness file made to appear just before a probe runs: the time from that probe's
/// start to Ready=True in a watch (the probe's own exec included); `None` when Ready came
/// before the planned probe (a stale `nextRun`), which would otherwise count as 0 ms.
async fn probe_to_ready(
    api: &Api<Pod>,
    fixture: &CriFixture,
    node: &CriNode,
    pod: &Pod,
) -> Option<Duration> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let mut updates = watch(api, name).await;
    let mut probe_at = next_probe(node, pod).await;
    // Too close to the next probe for the file to be there in time: the one after.
    if Timestamp::now().duration_until(probe_at) < jiff::SignedDuration::from_millis(300) {
        probe_at += jiff::SignedDuration::from_secs(1);
    }
    exec(fixture, pod, &["touch", "/tmp/ready"]).await;
    let ready_at = seen(&mut updates, true).await;
    let mut updates = watch(api, name).await;
    exec(fixture, pod, &["busybox", "rm", "/tmp/ready"]).await;
    seen(&mut updates, false).await;
    Duration::try_from(probe_at.duration_until(ready_at)).ok()
}

/// This process's user + system CPU time (the node's actors, its prober and the emulator).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// The process's CPU share (percent of one core) over `MEASURED` with `probed` pods running.
async fn cpu_with(cluster: &TestCluster, node: &str, probed: bool) -> f64 {
    let label = if probed { "probed" } else { "plain" };
    let names: Vec<String> = (0..PODS).map(|i| format!("{node}-{label}-{i}")).collect();
    for name in &names {
        create(&cluster.client, &serving_pod(name, node, probed)).await;
    }
    for name in &names {
        wait_pod(
            &cluster.client,
            "default",
            name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
    }
    let (cpu, wall) = (cpu_time(), Instant::now());
    tokio::time::sleep(MEASURED).await;
    let share = (cpu_time() - cpu).as_secs_f64() / wall.elapsed().as_secs_f64() * 100.0;
    let api = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    for name in &names {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for name in &names {
        eventually_async(&format!("{name} is gone"), || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }
    (share * 10.0).round() / 10.0
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e4).round() / 10.0
}

#[actix_rt::main]
async fn main() {
    if CriFixture::required("probes_bench").is_none() {
        return;
    }
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("probe-bench").await;
    let node = CriNode::start(&cluster.kubeconfig, &fixture, "probe-bench").await;
    node.guard(async {
        let api = Api::<Pod>::namespaced(cluster.client.clone(), "default");
        let name = format!("{}-latency", node.name);
        let probe = json!({"exec": {"command": ["test", "-e", "/tmp/ready"]},
                           "periodSeconds": 1, "failureThreshold": 1});
        let manifest = json!({"spec": {"containers": [container("app", UNTIL_TERM, Some(probe))]}});
        create(
            &cluster.client,
            &pod_manifest(&name, "default", &node.name, manifest),
        )
        .await;
        let pod = wait_pod(&cluster.client, "default", &name, "Running", |pod| {
            nodepulse_testkit::pods::phase(pod) == Some("Running")
        })
        .await;
        let mut to_ready = Vec::new();
        for _ in 0..SAMPLES {
            to_ready.extend(probe_to_ready(&api, &fixture, &node, &pod).await);
        }
        to_ready.sort();
        let valid = to_ready.len();
        assert!(valid > 0, "every sample saw Ready before its probe");
        let plain = cpu_with(&cluster, &node.name, false).await;
        let probed = cpu_with(&cluster, &node.name, true).await;
        let figures = json!({
            "probeRunToReadyInWatchMs": {
                "samples": valid,
                "dropped": SAMPLES - valid,
                "periodSeconds": 1,
                "p50": millis(to_ready[valid / 2]),
                "p90": millis(to_ready[valid * 9 / 10]),
                "max": millis(to_ready[valid - 1]),
            },
            "cpuPercentOfOneCore": {
                "containers": PODS * CONTAINERS_PER_POD,
                "seconds": MEASURED.as_secs(),
                "withoutProbes": plain,
                "with100TcpReadinessWorkersAt1s": probed,
            },
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&figures).unwrap_or_default()
        );
    })
    .await;
}
