//! The Node's conditions in the API, driven end to end by the real signal actors: Ready follows
//! a real containerd's CNI config; a killed containerd makes the Node NotReady with "container
//! runtime is down" once its last success is `containerRuntimeDownAfter` old, and Ready again after a restart; and
//! MemoryPressure follows a host (a fixture tree) within one housekeeping pass plus one PATCH;
//! images imported into the runtime show up in the Node's `status.images`. Prints the measured
//! latencies.

use nodepulse_testkit::containerd;
use nodepulse_testkit::oci_image;

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use containerd::Containerd;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Settings, Source},
    host::HostProbe,
    node::{NodeActors, NodeResources, Parts},
};
use nodepulse_actors::ports::{HostSignals, RuntimeService};
use nodepulse_cri::client::CriClient;
use nodepulse_supervisor::SupervisorHandle;
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    eventually_async,
    host_fixture::HostFixture,
};

/// NodeStatus and Lease from the daemon's wiring, fed by the signal actors on the given runtime
/// and host. Status is computed every second; reports are forced only every 5m.
async fn start_node(
    cluster: &TestCluster,
    name: &str,
    extra_yaml: &str,
    runtime: Option<Arc<dyn RuntimeService>>,
    host: Arc<dyn HostSignals>,
) -> SupervisorHandle {
    let yaml = format!(
        "nodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 5m\nnodeLeaseDurationSeconds: 4\nrootDir: /\nruntimeProbePeriod: 200ms\nhousekeepingInterval: 1s\n{extra_yaml}"
    );
    let settings = Settings {
        config: Config::parse(&yaml, Source::Embedded).expect("valid test configuration"),
        node_name: name.to_owned(),
        kubeconfig: Some(cluster.kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config)
        .await
        .expect("connects");
    let resources = NodeResources {
        runtime,
        host,
        ..NodeResources::for_host(&settings)
    };
    NodeActors::new(&settings)
        .api(api)
        .parts(Parts::HEARTBEAT_AND_SIGNALS)
        .resources(resources)
        .start()
        .expect("NodeStatus, Lease and the signal actors are wired")
        .supervisor
}

/// The condition `kind` of the Node as the API server has it: (status, message).
async fn condition(cluster: &TestCluster, name: &str, kind: &str) -> Option<(String, String)> {
    let node = Api::<Node>::all(cluster.client.clone())
        .get_opt(name)
        .await
        .ok()??;
    node.status?
        .conditions?
        .into_iter()
        .find(|condition| condition.type_ == kind)
        .map(|condition| (condition.status, condition.message.unwrap_or_default()))
}

async fn wait_for(
    cluster: &TestCluster,
    name: &str,
    kind: &str,
    check: impl Fn(&str, &str) -> bool,
) {
    eventually_async(&format!("{kind} on {name} as expected"), || async {
        condition(cluster, name, kind)
            .await
            .is_some_and(|(status, message)| check(&status, &message))
    })
    .await;
}

#[actix_rt::test]
async fn node_ready_follows_the_cni_config_of_a_real_containerd() {
    let Some(()) = Containerd::required("node_ready_follows_the_cni_config") else {
        return;
    };
    let containerd = Containerd::start();
    let cluster = TestCluster::start().await;
    let name = unique_node_name("signals-cni");
    let runtime: Arc<dyn RuntimeService> = Arc::new(
        CriClient::new(&containerd.endpoint(), Duration::from_secs(2)).expect("unix endpoint"),
    );
    // Only a 1-byte memory threshold: this host's disk must not decide the test.
    let host: Arc<dyn HostSignals> = Arc::new(HostProbe::host(Path::new("/")));
    let node = start_node(
        &cluster,
        &name,
        "evictionHard: {memory.available: \"1\"}\n",
        Some(runtime),
        host,
    )
    .await;
    wait_for(&cluster, &name, "Ready", |status, message| {
        status == "False"
            && message.contains("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady")
    })
    .await;

    containerd.write_cni_config();
    let written = Instant::now();
    wait_for(&cluster, &name, "Ready", |status, _| status == "True").await;
    eprintln!(
        "CNI conflist written → Node Ready=True in the API: {:?}",
        written.elapsed()
    );
    // A housekeeping pass on this host with a real runtime: ImageFsInfo, then the host's reads.
    let state = node
        .actor_state("eviction-signal", Duration::from_secs(5))
        .await
        .expect("debug state");
    let took = state["lastPass"]["tookSeconds"]
        .as_f64()
        .expect("a pass ran");
    eprintln!(
        "one housekeeping pass (ImageFsInfo + host reads): {:.2} ms",
        took * 1e3
    );
    assert!(
        state["lastPass"]["errors"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{state}"
    );

    // The runtime's images reach `status.images` (the kubelet's image list setter).
    let Some(()) = oci_image::busybox_required("node_ready_follows_the_cni_config: images") else {
        return;
    };
    containerd.import_test_images();
    let imported = Instant::now();
    eventually_async("the imported busybox image is in status.images", || async {
        let node = Api::<Node>::all(cluster.client.clone())
            .get_opt(&name)
            .await
            .ok()
            .flatten();
        let images = node
            .and_then(|node| node.status?.images)
            .unwrap_or_default();
        images.iter().any(|image| {
            image.size_bytes.is_some_and(|size| size > 0)
                && image
                    .names
                    .iter()
                    .flatten()
                    .any(|name| name == oci_image::BUSYBOX_IMAGE)
        })
    })
    .await;
    eprintln!(
        "images imported → Node status.images lists busybox: {:?}",
        imported.elapsed()
    );
}

/// The staleness threshold is shortened by configuration (`containerRuntimeDownAfter: 3s`; the
/// kubelet's is 30 s).
#[actix_rt::test]
async fn a_killed_containerd_makes_the_node_not_ready_as_down_and_a_restart_ready_again() {
    let Some(()) = Containerd::required("a_killed_containerd_makes_the_node_not_ready") else {
        return;
    };
    let mut containerd = Containerd::start();
    containerd.write_cni_config();
    let cluster = TestCluster::start().await;
    let name = unique_node_name("signals-down");
    let runtime: Arc<dyn RuntimeService> = Arc::new(
        CriClient::new(&containerd.endpoint(), Duration::from_secs(2)).expect("unix endpoint"),
    );
    let host: Arc<dyn HostSignals> = Arc::new(HostProbe::host(Path::new("/")));
    let _node = start_node(
        &cluster,
        &name,
        "evictionHard: {memory.available: \"1\"}\ncontainerRuntimeDownAfter: 3s\n",
        Some(runtime),
        host,
    )
    .await;
    wait_for(&cluster, &name, "Ready", |status, _| status == "True").await;

    containerd.kill();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(60);
    loop {
        let ready = condition(&cluster, &name, "Ready").await;
        if ready.as_ref().is_some_and(|(status, message)| {
            status == "False" && message.contains("container runtime is down")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no \"container runtime is down\" 60 s after the kill: {ready:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let down = killed.elapsed();
    eprintln!("containerd killed → Ready=False \"container runtime is down\" in the API: {down:?}");
    assert!(
        down >= Duration::from_millis(2900),
        "NotReady before the 3 s staleness: {down:?}"
    );

    containerd.restart();
    let restarted = Instant::now();
    wait_for(&cluster, &name, "Ready", |status, _| status == "True").await;
    eprintln!(
        "containerd restarted → Ready=True in the API: {:?}",
        restarted.elapsed()
    );
}

#[actix_rt::test]
async fn memory_pressure_reaches_the_node_within_a_housekeeping_pass_and_a_patch() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("signals-pressure");
    let fixture = HostFixture::new(4 * 1024 * 1024);
    let host: Arc<dyn HostSignals> = Arc::new(HostProbe::new(fixture.root(), Path::new("/")));
    let _node = start_node(
        &cluster,
        &name,
        "runtime: simulated\nevictionHard: {memory.available: 100Mi}\n",
        None,
        host,
    )
    .await;
    wait_for(&cluster, &name, "MemoryPressure", |status, _| {
        status == "False"
    })
    .await;
    wait_for(&cluster, &name, "Ready", |status, _| status == "True").await;

    fixture.set_free_memory(50 * 1024);
    let crossed = Instant::now();
    wait_for(&cluster, &name, "MemoryPressure", |status, _| {
        status == "True"
    })
    .await;
    let latency = crossed.elapsed();
    eprintln!("memory threshold crossed → MemoryPressure=True in the API: {latency:?}");
    assert!(
        latency < Duration::from_secs(5),
        "one 1s housekeeping pass plus one PATCH took {latency:?}"
    );
}
