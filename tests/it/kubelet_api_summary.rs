//! `/stats/summary` and `/metrics/probes` on a real container (containerd), through the
//! kubelet API over TLS: the Summary parsed into types mirroring the kubelet's `stats/v1alpha1`
//! (unknown fields refused, so a misnamed field fails), the node's figures from the host and a
//! busybox pod's — its container's CPU, memory, writable layer and logs, its emptyDir volume
//! and its ephemeral storage — its system containers (this process's cgroup as `kubelet` where
//! the kubelet's rule finds one, a cgroup of the test's own as `misc`) and the node's pressure
//! (PSI), each checked against the same cgroup and pressure files read by the test, and the
//! reduced `only_cpu_and_memory` form; the prober's
//! successes of the pod's readiness probe counted in `prober_probe_total`; the pod, whole, in
//! `/pods`. Through the API server's node proxy (the emulator), the summary's shape as
//! `kubectl get --raw` reads it.

// The types mirror the schema whole: a field is there to be refused when misnamed, read or not.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    cri_pods::{NAMESPACE, Setup, create_pod, shell},
    kubelet_api_logs::serve_with,
};
use nodepulse_testkit::{
    eventually_async,
    host_cgroups::{self, TestCgroup},
    pods::wait_running,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Summary {
    node: NodeStats,
    pods: Vec<PodStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NodeStats {
    node_name: String,
    #[serde(default)]
    system_containers: Vec<ContainerStats>,
    start_time: String,
    cpu: Option<CpuStats>,
    memory: Option<MemoryStats>,
    io: Option<IoStats>,
    network: Option<NetworkStats>,
    fs: Option<FsStats>,
    runtime: Option<RuntimeStats>,
    rlimit: Option<RlimitStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuntimeStats {
    image_fs: Option<FsStats>,
    container_fs: Option<FsStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RlimitStats {
    time: String,
    maxpid: Option<u64>,
    curproc: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PodReference {
    name: String,
    namespace: String,
    uid: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodStats {
    pod_ref: PodReference,
    start_time: String,
    containers: Vec<ContainerStats>,
    cpu: Option<CpuStats>,
    memory: Option<MemoryStats>,
    io: Option<IoStats>,
    network: Option<NetworkStats>,
    #[serde(default)]
    volume: Vec<VolumeStats>,
    #[serde(rename = "ephemeral-storage")]
    ephemeral_storage: Option<FsStats>,
    /// The kubelet's one snake_case field (`json:"process_stats"`).
    #[serde(rename = "process_stats")]
    process_stats: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContainerStats {
    name: String,
    start_time: String,
    cpu: Option<CpuStats>,
    memory: Option<MemoryStats>,
    io: Option<IoStats>,
    rootfs: Option<FsStats>,
    logs: Option<FsStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CpuStats {
    time: String,
    usage_nano_cores: Option<u64>,
    usage_core_nano_seconds: Option<u64>,
    psi: Option<PsiStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IoStats {
    time: String,
    psi: Option<PsiStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PsiStats {
    full: PsiData,
    some: PsiData,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PsiData {
    total: u64,
    avg10: f64,
    avg60: f64,
    avg300: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MemoryStats {
    time: String,
    available_bytes: Option<u64>,
    usage_bytes: Option<u64>,
    working_set_bytes: Option<u64>,
    rss_bytes: Option<u64>,
    page_faults: Option<u64>,
    major_page_faults: Option<u64>,
    psi: Option<PsiStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InterfaceStats {
    name: String,
    rx_bytes: Option<u64>,
    rx_errors: Option<u64>,
    tx_bytes: Option<u64>,
    tx_errors: Option<u64>,
}

/// The default interface inline (its fields spelled out: serde refuses unknown fields only
/// without `flatten`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NetworkStats {
    time: String,
    name: String,
    rx_bytes: Option<u64>,
    rx_errors: Option<u64>,
    tx_bytes: Option<u64>,
    tx_errors: Option<u64>,
    #[serde(default)]
    interfaces: Vec<InterfaceStats>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FsStats {
    time: String,
    available_bytes: Option<u64>,
    capacity_bytes: Option<u64>,
    used_bytes: Option<u64>,
    inodes_free: Option<u64>,
    inodes: Option<u64>,
    inodes_used: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VolumeStats {
    time: String,
    available_bytes: Option<u64>,
    capacity_bytes: Option<u64>,
    used_bytes: Option<u64>,
    inodes_free: Option<u64>,
    inodes: Option<u64>,
    inodes_used: Option<u64>,
    name: String,
    pvc_ref: Option<serde_json::Value>,
}

/// A `metav1.Time` as the kubelet writes it: RFC 3339, whole seconds, UTC, and of now.
fn recent(time: &str) -> jiff::Timestamp {
    let parsed: jiff::Timestamp = time.parse().unwrap_or_else(|_| panic!("{time:?}"));
    assert_eq!(time, parsed.to_string(), "whole seconds in UTC");
    assert!(!time.contains('.'), "{time}");
    let age = jiff::Timestamp::now().duration_since(parsed).as_secs();
    assert!((-5..600).contains(&age), "{time} is not now");
    parsed
}

/// Capacity, availability and use of one filesystem fit together.
fn filesystem(what: &str, fs: &FsStats) {
    recent(&fs.time);
    let capacity = fs
        .capacity_bytes
        .unwrap_or_else(|| panic!("{what}: {fs:?}"));
    let available = fs.available_bytes.expect("available");
    assert!(capacity > 0 && available <= capacity, "{what}: {fs:?}");
    assert!(
        fs.used_bytes.is_some_and(|used| used <= capacity),
        "{what}: {fs:?}"
    );
}

/// A pod whose container spends some CPU, writes 64 KiB to an emptyDir, logs a line and is
/// probed for readiness every second.
fn busy_pod() -> serde_json::Value {
    let script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; \
        dd if=/dev/zero of=/scratch/file bs=1024 count=64 2>/dev/null; echo written; \
        trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
    let mut app = shell("app", script);
    app["volumeMounts"] = serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}]);
    app["readinessProbe"] = serde_json::json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
    serde_json::json!({"spec": {
        "restartPolicy": "Always",
        "containers": [app],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }})
}

fn ours<'a>(summary: &'a Summary, name: &str) -> Option<&'a PodStats> {
    summary.pods.iter().find(|pod| pod.pod_ref.name == name)
}

#[actix_rt::test]
async fn the_summary_shows_the_node_and_a_running_pod_with_its_container_and_volumes() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "the_summary_shows_the_node_and_a_running_pod_with_its_container_and_volumes",
        "summary",
    )
    .await
    else {
        return;
    };
    let misc = TestCgroup::start("summary");
    let api = serve_with(
        &node,
        &cluster.kubeconfig,
        &format!("systemCgroups: {}\n", misc.name),
    )
    .await;
    node.guard(async {
        let name = format!("{}-busy", node.name);
        create_pod(&cluster, &node.name, &name, busy_pod()).await;
        let pod = wait_running(&cluster.client, NAMESPACE, &name).await;
        let uid = pod.metadata.uid.clone().expect("a UID");
        let client = &api.client;
        let summary = |query: &'static str| async move {
            let answer = client.get(&format!("/stats/summary{query}")).await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(
                answer.headers.get("content-type").map(|v| v.as_bytes()),
                Some(&b"application/json"[..])
            );
            serde_json::from_str::<Summary>(&answer.body)
                .unwrap_or_else(|error| panic!("{error}: {}", answer.body))
        };
        eventually_async(
            "the pod's CPU and its volume's 64 KiB are served",
            || async {
                let summary = summary("").await;
                ours(&summary, &name).is_some_and(|pod| {
                    let cpu = pod.containers.first().and_then(|c| c.cpu.as_ref());
                    let scratch = pod.volume.iter().find(|v| v.name == "scratch");
                    cpu.and_then(|cpu| cpu.usage_core_nano_seconds) > Some(0)
                        && scratch.and_then(|v| v.used_bytes) >= Some(64 * 1024)
                })
            },
        )
        .await;
        let before = Readings::now(&misc);
        let full = summary("").await;
        let after = Readings::now(&misc);

        let node_stats = &full.node;
        assert_eq!(node_stats.node_name, node.name);
        system_containers(&full.node, &before, &after, Scope::Full);
        node_pressure(&full.node, &before, &after, Scope::Full);
        let boot = recent_or_boot(&node_stats.start_time);
        assert!(boot <= jiff::Timestamp::now());
        let cpu = node_stats.cpu.as_ref().expect("node cpu");
        recent(&cpu.time);
        assert!(cpu.usage_core_nano_seconds > Some(0), "{cpu:?}");
        let memory = node_stats.memory.as_ref().expect("node memory");
        recent(&memory.time);
        let working_set = memory.working_set_bytes.expect("working set");
        assert!(
            working_set > 0 && memory.usage_bytes >= Some(working_set),
            "{memory:?}"
        );
        assert!(memory.available_bytes.is_some(), "{memory:?}");
        assert!(
            memory.rss_bytes > Some(0) && memory.page_faults > Some(0),
            "{memory:?}"
        );
        let network = node_stats.network.as_ref().expect("node network");
        recent(&network.time);
        assert!(
            network
                .interfaces
                .iter()
                .all(|i| i.name != "lo" && i.rx_bytes.is_some()),
            "{network:?}"
        );
        filesystem("node fs", node_stats.fs.as_ref().expect("node fs"));
        let runtime = node_stats.runtime.as_ref().expect("runtime");
        assert!(runtime.container_fs.is_none());
        let image_fs = runtime.image_fs.as_ref().expect("imageFs");
        filesystem("imageFs", image_fs);
        // containerd measures its snapshots on a timer of its own: a figure, maybe zero yet.
        assert!(
            image_fs.used_bytes.is_some() && image_fs.inodes_used.is_some(),
            "{image_fs:?}"
        );
        let rlimit = node_stats.rlimit.as_ref().expect("rlimit");
        recent(&rlimit.time);
        assert!(
            rlimit.maxpid > rlimit.curproc && rlimit.curproc > Some(0),
            "{rlimit:?}"
        );

        let pod = ours(&full, &name).expect("our pod");
        assert_eq!(
            (pod.pod_ref.namespace.as_str(), pod.pod_ref.uid.as_str()),
            (NAMESPACE, uid.as_str())
        );
        recent(&pod.start_time);
        // The pod's network is its sandbox's namespace's; its processes its cgroups'.
        let network = pod.network.as_ref().expect("the pod's network");
        recent(&network.time);
        assert!(
            network
                .interfaces
                .iter()
                .any(|i| i.name == "eth0" && i.rx_bytes.is_some()),
            "{network:?}"
        );
        let processes = (pod.process_stats.as_ref()).and_then(|p| p["process_count"].as_u64());
        assert!(
            processes >= Some(2),
            "pause and the shell: {:?}",
            pod.process_stats
        );
        let [container] = pod.containers.as_slice() else {
            panic!("one container: {:?}", pod.containers)
        };
        assert_eq!(container.name, "app");
        let started = recent(&container.start_time);
        assert!(
            started >= recent(&pod.start_time),
            "a container starts in its sandbox"
        );
        let container_cpu = container.cpu.as_ref().expect("container cpu");
        recent(&container_cpu.time);
        // A busybox shell: some CPU, well under an hour of it.
        let used = container_cpu.usage_core_nano_seconds.expect("cumulative");
        assert!(used > 0 && used < 3_600_000_000_000, "{container_cpu:?}");
        let container_memory = container.memory.as_ref().expect("container memory");
        let working_set = container_memory.working_set_bytes.expect("working set");
        assert!(
            (4096..1 << 30).contains(&working_set),
            "{container_memory:?}"
        );
        let pod_cpu = pod.cpu.as_ref().expect("pod cpu");
        assert!(pod_cpu.usage_core_nano_seconds >= Some(used), "{pod_cpu:?}");
        let pod_memory = pod.memory.as_ref().expect("pod memory");
        assert!(
            pod_memory.working_set_bytes >= Some(working_set),
            "{pod_memory:?}"
        );
        let rootfs = container.rootfs.as_ref().expect("rootfs");
        filesystem("rootfs", rootfs);
        let logs = container.logs.as_ref().expect("logs");
        filesystem("logs", logs);
        assert!(
            logs.used_bytes > Some(0) && logs.inodes_used >= Some(2),
            "the log file: {logs:?}"
        );
        let scratch = pod
            .volume
            .iter()
            .find(|v| v.name == "scratch")
            .expect("scratch");
        recent(&scratch.time);
        assert!(
            scratch.pvc_ref.is_none() && scratch.inodes_used >= Some(2),
            "{scratch:?}"
        );
        assert!(scratch.capacity_bytes >= scratch.used_bytes, "{scratch:?}");
        let ephemeral = pod.ephemeral_storage.as_ref().expect("ephemeral storage");
        filesystem("ephemeral storage", ephemeral);
        let counted = [rootfs.used_bytes, logs.used_bytes, scratch.used_bytes];
        assert!(
            ephemeral.used_bytes >= Some(counted.iter().flatten().sum()),
            "the writable layer, the logs and the emptyDir: {ephemeral:?}"
        );

        let before = Readings::now(&misc);
        let reduced = summary("?only_cpu_and_memory=true").await;
        let after = Readings::now(&misc);
        system_containers(&reduced.node, &before, &after, Scope::CpuAndMemory);
        node_pressure(&reduced.node, &before, &after, Scope::CpuAndMemory);
        let node_stats = &reduced.node;
        assert!(node_stats.cpu.is_some() && node_stats.memory.is_some());
        assert!(
            node_stats.fs.is_none()
                && node_stats.network.is_none()
                && node_stats.runtime.is_none()
                && node_stats.rlimit.is_none()
        );
        let pod = ours(&reduced, &name).expect("our pod");
        assert!(pod.cpu.is_some() && pod.memory.is_some());
        assert!(pod.volume.is_empty() && pod.ephemeral_storage.is_none() && pod.network.is_none());
        let container = pod.containers.first().expect("the container");
        assert!(container.cpu.is_some() && container.memory.is_some());
        assert!(container.rootfs.is_none() && container.logs.is_none());

        // `/pods`: the pods bound here, whole, as a PodList.
        let list: serde_json::Value =
            serde_json::from_str(&client.get("/pods").await.body).expect("JSON");
        assert_eq!(
            (list["kind"].as_str(), list["apiVersion"].as_str()),
            (Some("PodList"), Some("v1"))
        );
        let items = list["items"].as_array().expect("items");
        let bound = items
            .iter()
            .find(|item| item["metadata"]["uid"] == uid.as_str())
            .expect("ours");
        assert_eq!(bound["metadata"]["name"], name.as_str());
        assert_eq!(bound["spec"]["nodeName"], node.name.as_str());
        assert_eq!(bound["spec"]["volumes"][0]["name"], "scratch");
        assert!(
            bound.get("kind").is_none(),
            "typed items carry no kind: {bound}"
        );

        // The readiness probe runs every second; each success is counted.
        let probes = || async {
            let answer = client.get("/metrics/probes").await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            successes(&answer.body, &name, &uid)
        };
        let first = probes()
            .await
            .expect("the readiness probe has succeeded (the pod is Ready)");
        eventually_async("more readiness successes are counted", || async {
            probes().await > Some(first)
        })
        .await;
    })
    .await;
    api.served.stop();
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    Full,
    CpuAndMemory,
}

/// What the test reads itself around a scrape: the `misc` cgroup's CPU time and the `some`
/// totals of the node's and that cgroup's pressure files (`None` where the kernel has none).
struct Readings {
    misc_cpu: u64,
    misc_cpu_pressure: Option<u64>,
    node_pressure: [Option<u64>; 3],
}

const RESOURCES: [&str; 3] = ["cpu", "memory", "io"];

impl Readings {
    fn now(misc: &TestCgroup) -> Self {
        let total = |path: Option<std::path::PathBuf>| {
            path.map(|path| host_cgroups::some_total(&path).expect("a some line"))
        };
        Self {
            misc_cpu: misc.cpu_nanos(),
            misc_cpu_pressure: total(misc.cpu_pressure_file()),
            node_pressure: RESOURCES
                .map(|resource| total(host_cgroups::node_pressure_file(resource))),
        }
    }
}

/// A pressure figure whose `some` total the kernel counted between the two readings (both
/// `None`: the kernel has no such file, and the figure must be left out).
fn pressure(what: &str, psi: Option<&PsiStats>, before: Option<u64>, after: Option<u64>) {
    match (psi, before, after) {
        (None, None, None) => {}
        (Some(psi), Some(before), Some(after)) => {
            assert!(
                (before..=after).contains(&psi.some.total),
                "{what}: {} not in {before}..={after}",
                psi.some.total
            );
            assert!(psi.full.total <= psi.some.total, "{what}: {psi:?}");
            for average in [
                psi.some.avg10,
                psi.some.avg60,
                psi.some.avg300,
                psi.full.avg10,
            ] {
                assert!((0.0..=100.0).contains(&average), "{what}: {psi:?}");
            }
        }
        (psi, before, _) => panic!("{what}: served {psi:?}, the host's file says {before:?}"),
    }
}

/// The node's CPU, memory and I/O pressure as the host's files have them; no `io` in the
/// reduced form.
fn node_pressure(node: &NodeStats, before: &Readings, after: &Readings, scope: Scope) {
    let [cpu, memory, io] = [0, 1, 2].map(|i| (before.node_pressure[i], after.node_pressure[i]));
    pressure(
        "node cpu",
        node.cpu.as_ref().and_then(|c| c.psi.as_ref()),
        cpu.0,
        cpu.1,
    );
    let memory_psi = node.memory.as_ref().and_then(|m| m.psi.as_ref());
    pressure("node memory", memory_psi, memory.0, memory.1);
    match scope {
        Scope::Full => {
            let io_psi = node.io.as_ref().and_then(|io| {
                recent(&io.time);
                io.psi.as_ref()
            });
            pressure("node io", io_psi, io.0, io.1);
        }
        Scope::CpuAndMemory => assert!(node.io.is_none(), "{:?}", node.io),
    }
}

/// `kubelet` where this process's cgroup is one the kubelet accounts, `misc` (the test's
/// cgroup, `systemCgroups`), nothing else (no `runtimeCgroups`, and nodepulse's pods share no
/// root cgroup): each with CPU and memory, `misc`'s CPU time between the test's readings.
fn system_containers(node: &NodeStats, before: &Readings, after: &Readings, scope: Scope) {
    let names: Vec<&str> = (node.system_containers.iter())
        .map(|c| c.name.as_str())
        .collect();
    let expected: Vec<&str> = (host_cgroups::own_cgroup().map(|_| "kubelet").into_iter())
        .chain(["misc"])
        .collect();
    assert_eq!(names, expected, "{:?}", node.system_containers);
    for container in &node.system_containers {
        recent(&container.start_time);
        assert!(container.rootfs.is_none() && container.logs.is_none());
        let cpu = container.cpu.as_ref().expect("cpu");
        recent(&cpu.time);
        let memory = container.memory.as_ref().expect("memory");
        let usage = memory.usage_bytes.expect("usage");
        assert!(
            memory.working_set_bytes.is_some_and(|ws| ws <= usage),
            "{memory:?}"
        );
        if scope == Scope::CpuAndMemory {
            assert!(container.io.is_none(), "{container:?}");
        }
    }
    let misc = node.system_containers.last().expect("misc");
    let used = misc
        .cpu
        .as_ref()
        .and_then(|cpu| cpu.usage_core_nano_seconds);
    assert!(
        used.is_some_and(|used| used > 0 && (before.misc_cpu..=after.misc_cpu).contains(&used)),
        "{used:?} not in {}..={}",
        before.misc_cpu,
        after.misc_cpu
    );
    let psi = misc.cpu.as_ref().and_then(|cpu| cpu.psi.as_ref());
    pressure(
        "misc cpu",
        psi,
        before.misc_cpu_pressure,
        after.misc_cpu_pressure,
    );
}

/// The node's start: its boot, so not "now", but in the past and parseable to the second.
fn recent_or_boot(time: &str) -> jiff::Timestamp {
    let parsed: jiff::Timestamp = time.parse().unwrap_or_else(|_| panic!("{time:?}"));
    assert_eq!(time, parsed.to_string(), "whole seconds in UTC");
    parsed
}

/// The count of `prober_probe_total` for the pod's readiness successes, if there is one.
fn successes(text: &str, pod: &str, uid: &str) -> Option<u64> {
    let wanted: BTreeMap<&str, &str> = [
        ("container", "app"),
        ("namespace", NAMESPACE),
        ("pod", pod),
        ("pod_uid", uid),
        ("probe_type", "Readiness"),
        ("result", "successful"),
    ]
    .into_iter()
    .collect();
    assert!(
        text.contains("# TYPE prober_probe_total counter\n"),
        "{text}"
    );
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("prober_probe_total{")?;
        let (labels, value) = rest.split_once("} ")?;
        let labels: BTreeMap<&str, &str> = labels
            .split(',')
            .filter_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                Some((key, value.trim_matches('"')))
            })
            .collect();
        (labels == wanted).then(|| value.parse().expect("a count"))
    })
}

/// `kubectl get --raw /api/v1/nodes/<n>/proxy/…` through the API server (the emulator, which
/// dials the node's kubelet API with its client certificate as kube-apiserver does).
#[actix_rt::test]
async fn the_summary_and_the_pods_are_read_through_the_api_servers_node_proxy() {
    let test = "the_summary_and_the_pods_are_read_through_the_api_servers_node_proxy";
    if nodepulse_testkit::cri_fixture::CriFixture::required(test).is_none()
        || !super::kubelet_api_logs::kubectl_available(test)
    {
        return;
    }
    let cluster =
        nodepulse_testkit::cluster::TestCluster::start_with(nodepulse_emulator::EmulatorConfig {
            kubelet_preferred_address_types: vec!["InternalIP".into(), "Hostname".into()],
            ..nodepulse_emulator::EmulatorConfig::for_tests()
        })
        .await;
    let Some(emulator) = cluster.emulator.as_ref() else {
        // A real API server dials the node's Hostname, a unique test name nothing resolves.
        nodepulse_testkit::skip::skipped(
            test,
            "the emulator (a node address the API server dials)",
        );
        return;
    };
    let fixture = nodepulse_testkit::cri_fixture::CriFixture::start("summary-proxy").await;
    let (node, served) = nodepulse_testkit::cri_node::CriNode::start_with_kubelet_api(
        &cluster.kubeconfig,
        &fixture,
        "summary-proxy",
        emulator.kubelet_client_ca_pem(),
    )
    .await;
    node.guard(async {
        let name = format!("{}-busy", node.name);
        create_pod(&cluster, &node.name, &name, busy_pod()).await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let raw = |path: String| {
            let kubeconfig = cluster.kubeconfig.clone();
            async move {
                let output = tokio::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["get", "--raw", &path])
                    .output()
                    .await
                    .expect("kubectl runs");
                assert!(
                    output.status.success(),
                    "{}",
                    String::from_utf8_lossy(&output.stderr)
                );
                String::from_utf8_lossy(&output.stdout).into_owned()
            }
        };
        let proxied = |path: &str| format!("/api/v1/nodes/{}/proxy/{path}", node.name);
        eventually_async("the proxied summary shows the pod's container", || async {
            let body = raw(proxied("stats/summary")).await;
            let summary: Summary =
                serde_json::from_str(&body).unwrap_or_else(|error| panic!("{error}: {body}"));
            summary.node.node_name == node.name
                && ours(&summary, &name).is_some_and(|pod| {
                    pod.containers
                        .iter()
                        .any(|c| c.name == "app" && c.memory.is_some())
                })
        })
        .await;
        let pods: serde_json::Value =
            serde_json::from_str(&raw(proxied("pods")).await).expect("a PodList");
        assert!(
            (pods["items"].as_array().into_iter().flatten())
                .any(|item| item["metadata"]["name"] == name.as_str()),
            "{pods}"
        );
        let probes = raw(proxied("metrics/probes")).await;
        assert!(probes.contains(&format!("pod=\"{name}\"")), "{probes}");
    })
    .await;
    served.stop();
}
