//! The daemon process itself attacked: SIGTERM ends it cleanly (exit 0 within the shutdown
//! deadline, its Lease left to expire); SIGKILL and a restart leave the Node and Lease adopted,
//! not recreated, with no NotReady blip and the pods still Running; a killed and restarted
//! containerd turns the node NotReady and Ready again while it never goes Unknown.

use nodepulse_testkit::containerd;

use std::time::{Duration, Instant, SystemTime};

use containerd::Containerd;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use nodepulse_actors::status_manager::NAME as STATUS_MANAGER;
use nodepulse_emulator::{FaultAction, FaultRule, Verb};
use nodepulse_testkit::{
    attack::{
        RENEW_INTERVAL, clean_up, lifecycle_emulator, needs_emulator, ready_daemon, running_pod,
        shortened_intervals, wait_ready_with_lease,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
    node_history::NodeHistory,
    observer::NodeObserver,
    pods::{condition, phase, running_and_ready},
};
use serde_json::json;

/// The daemon's own bound on stopping its actors, plus room for a loaded machine.
const SHUTDOWN_WITHIN: Duration = Duration::from_secs(15);
/// Room for a loaded machine on top of each timing bound.
const SLACK: Duration = Duration::from_secs(3);

async fn lease(client: &kube::Client, name: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get(name)
        .await
        .expect("the Lease")
}

fn renew_time(lease: &Lease) -> Option<SystemTime> {
    lease
        .spec
        .as_ref()?
        .renew_time
        .as_ref()
        .map(|time| SystemTime::from(time.0))
}

#[actix_rt::test]
async fn sigterm_exits_zero_within_the_deadline_and_leaves_the_lease_to_expire() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("sigterm");
    let mut daemon = ready_daemon(&cluster, &name, 10).await;
    let pod = format!("{name}-before-sigterm");
    running_pod(&cluster.client, &name, &pod).await;

    let asked = Instant::now();
    daemon.signal("TERM");
    let code = daemon.wait_exit(SHUTDOWN_WITHIN + SLACK).await;
    let took = asked.elapsed();
    eprintln!("SIGTERM → exit {code:?} in {took:?}");
    assert_eq!(
        code,
        Some(0),
        "exit code; stderr:\n{}",
        daemon.log_lines().join("\n")
    );
    assert!(took <= SHUTDOWN_WITHIN, "the shutdown took {took:?}");
    assert!(
        !daemon.events("shutting down").is_empty(),
        "the shutdown was logged"
    );
    // Left to expire, as the kubelet does: still there, still held by this node.
    let left = lease(&cluster.client, &name).await;
    assert_eq!(
        left.spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.as_deref()),
        Some(name.as_str())
    );
    // And the pod's last status stays as it was written.
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    assert_eq!(phase(&pods.get(&pod).await.expect("pod")), Some("Running"));
    clean_up(&cluster, daemon, &name).await;
}

/// A status decided just before SIGTERM whose write failed would wait for the next batch pass
/// (10 s away), which never comes: the shutdown sends it first.
#[actix_rt::test]
async fn sigterm_first_sends_the_pod_statuses_the_api_lacks() {
    let cluster = TestCluster::start().await;
    if !needs_emulator(
        &cluster,
        "sigterm_first_sends_the_pod_statuses_the_api_lacks",
    ) {
        return;
    }
    let name = unique_node_name("sigterm-flush");
    let mut daemon = ready_daemon(&cluster, &name, 10).await;
    let pod = format!("{name}-flips");
    running_pod(&cluster.client, &name, &pod).await;
    let faults = cluster.faults();
    // A 500: no client retries it, so the write fails for good and waits for the batch pass.
    let refused = faults.inject(
        FaultRule::new(FaultAction::Error {
            code: 500,
            message: None,
        })
        .resource("pods")
        .subresource("status")
        .name(&pod),
    );
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let unready = json!({"metadata": {"annotations": {"nodepulse.io/simulated-unready": "app"}}});
    pods.patch(&pod, &PatchParams::default(), &Patch::Merge(&unready))
        .await
        .expect("annotated");
    eventually_async(
        "the unready status is decided and its write refused",
        || async {
            let state = &daemon.actor(STATUS_MANAGER).await["actorState"]["value"];
            state["unsent"] == 1 && state["counters"]["failures"].as_u64() >= Some(1)
        },
    )
    .await;
    assert!(faults.remove(refused), "the fault was still in place");

    daemon.signal("TERM");
    let code = daemon.wait_exit(SHUTDOWN_WITHIN + SLACK).await;
    assert_eq!(
        code,
        Some(0),
        "exit code; stderr:\n{}",
        daemon.log_lines().join("\n")
    );
    let written = pods.get(&pod).await.expect("pod");
    assert_eq!(
        condition(&written, "Ready").as_deref(),
        Some("False"),
        "the status decided before SIGTERM is in the API: {:?}",
        written.status
    );
    assert!(
        !daemon.events("every pod status is in the API").is_empty(),
        "the flush was logged; stderr:\n{}",
        daemon.log_lines().join("\n")
    );
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn sigkill_and_restart_adopt_the_node_and_lease_without_a_not_ready_blip() {
    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(
        &cluster,
        "sigkill_and_restart_adopt_the_node_and_lease_without_a_not_ready_blip",
    ) {
        return;
    }
    let name = unique_node_name("sigkill");
    let yaml = attack_config(&shortened_intervals(10));
    let mut first = ready_daemon(&cluster, &name, 10).await;
    let pod = format!("{name}-survivor");
    running_pod(&cluster.client, &name, &pod).await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    let node_uid = nodes.get(&name).await.expect("node").metadata.uid;
    let lease_uid = lease(&cluster.client, &name).await.metadata.uid;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let history = NodeHistory::start(&cluster.client, &name).await;
    let watching_since = Instant::now();

    first.signal("KILL");
    assert_eq!(
        first.wait_exit(Duration::from_secs(10)).await,
        Some(-9),
        "killed by SIGKILL"
    );
    let killed = SystemTime::now();
    let killed_at = Instant::now();
    let second = DaemonProcess::start(&cluster.kubeconfig, &name, &yaml).await;
    eventually_async("the new process renews the Lease", || async {
        renew_time(&lease(&cluster.client, &name).await).is_some_and(|renewed| renewed > killed)
    })
    .await;
    let renewed_after = killed_at.elapsed();
    // A blip would come with the new process's first status: wait until the API has taken it.
    let emulator = cluster.emulator.as_ref().expect("the emulator");
    eventually_async("the new process's first Node status is written", || async {
        emulator.requests().iter().any(|request| {
            request.received > killed_at
                && request.verb == Verb::Patch
                && request.resource == "nodes"
                && request.subresource == "status"
                && request.name == name
                && request.code == 200
        })
    })
    .await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let survivor = pods.get(&pod).await.expect("pod");
    eprintln!(
        "SIGKILL → new process renewed the Lease {renewed_after:?} after the kill; worst lease lag {:?}",
        observer.worst_lag_since(watching_since)
    );
    let wrong = observer.wrong_since(watching_since);
    assert!(
        wrong.is_empty(),
        "the node looked wrong across the restart: {wrong:#?}"
    );
    // Polls can miss a blip between them; the watch saw every write of the Node.
    assert_eq!(
        history.gaps(),
        Vec::<String>::new(),
        "the watch saw every write"
    );
    let blips: Vec<_> = history
        .versions()
        .into_iter()
        .filter(|version| version.conditions != observer.baseline || version.unreachable)
        .collect();
    assert!(
        blips.is_empty(),
        "the Node was written otherwise: {blips:#?}"
    );
    assert_eq!(
        nodes.get(&name).await.expect("node").metadata.uid,
        node_uid,
        "the Node was adopted, not recreated"
    );
    assert_eq!(
        lease(&cluster.client, &name).await.metadata.uid,
        lease_uid,
        "the Lease was adopted, not recreated"
    );
    assert!(
        running_and_ready(&survivor),
        "the pod bound before the kill is still Running: {:?}",
        survivor.status
    );
    drop(second);
}

#[actix_rt::test]
async fn containerd_killed_and_restarted_turns_the_node_not_ready_and_back_never_unknown() {
    let Some(()) = Containerd::required("containerd_killed_and_restarted") else {
        return;
    };
    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(&cluster, "containerd_killed_and_restarted") {
        return;
    }
    let mut containerd = Containerd::start();
    containerd.write_cni_config();
    let name = unique_node_name("containerd");
    // Its own root dir (the kubelet API writes its certificate under it) and API ports.
    let root = nodepulse_testkit::root_dir::RootDir::new();
    let yaml = format!(
        "runtime: cri\ncontainerRuntimeEndpoint: {}\nruntimeProbePeriod: 1s\ncontainerRuntimeDownAfter: 3s\nrootDir: {}\nport: 0\nhealthzPort: 0\nevictionHard:\n  memory.available: 1Mi\ndebug:\n  address: 127.0.0.1:0\n{}",
        containerd.endpoint(),
        root.path().display(),
        shortened_intervals(10)
    );
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &yaml).await;
    wait_ready_with_lease(&cluster.client, &name).await;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let watching_since = Instant::now();
    let nodes = Api::<Node>::all(cluster.client.clone());
    let ready = || async {
        nodes.get_opt(&name).await.ok().flatten().and_then(|node| {
            nodepulse_testkit::observer::conditions(&node)
                .get("Ready")
                .cloned()
        })
    };

    containerd.kill();
    let killed_at = Instant::now();
    eventually_async("Ready=False once the runtime is down", || async {
        ready().await.as_deref() == Some("False")
    })
    .await;
    let not_ready_after = killed_at.elapsed();
    containerd.restart();
    let restarted_at = Instant::now();
    eventually_async("Ready=True once the runtime is back", || async {
        ready().await.as_deref() == Some("True")
    })
    .await;
    let ready_after = restarted_at.elapsed();
    let worst_lag = observer.worst_lag_since(watching_since);
    eprintln!(
        "CONTAINERD killed → NotReady after {not_ready_after:?}; restarted → Ready after {ready_after:?}; worst lease lag {worst_lag:?}"
    );
    let unknown: Vec<String> = observer
        .wrong_since(watching_since)
        .into_iter()
        .filter(|what| what.contains("\"Unknown\"") || what.contains("unreachable"))
        .collect();
    assert!(unknown.is_empty(), "the node went Unknown: {unknown:#?}");
    // The runtime's state is not the node's liveness: renewals went on throughout.
    assert!(
        worst_lag <= RENEW_INTERVAL + SLACK,
        "the Lease lagged {worst_lag:?} while the runtime was down"
    );
    drop(daemon);
}
