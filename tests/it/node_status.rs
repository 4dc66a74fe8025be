//! NodeStatusActor with LeaseActor, through the real kube-rs adapter and the real host, against
//! an API server (the emulator, or a real cluster with NODEPULSE_TEST_KUBECONFIG): registration,
//! every setter's output on this host, Ready following the runtime, adoption and
//! re-registration, no PATCH without a change, and the report-frequency PATCH.

use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api,
    api::{DeleteParams, PostParams, WatchEvent, WatchParams},
};
use nodepulse::node::NodeAddresses;
use nodepulse_actors::messages::RuntimeHealth;
use nodepulse_supervisor::SupervisorHandle;
use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    eventually, eventually_async,
    node::{healthy_runtime, report_healthy_and_wait_ready, start_api_actors},
};

struct Running {
    supervisor: SupervisorHandle,
    addresses: NodeAddresses,
}

impl Running {
    /// Waits until a status sync has run after the last report and found nothing to send.
    async fn steady(&self) {
        eventually_async("a sync found nothing to send", || async {
            let state = self
                .supervisor
                .actor_state("node-status", PATIENCE)
                .await
                .unwrap_or_default();
            state["lastSync"]["result"]
                .as_str()
                .is_some_and(|result| result.starts_with("unchanged"))
        })
        .await;
    }
}

/// Status computed every second; reports forced only every `report` (5m: never in a test).
async fn start_node(cluster: &TestCluster, name: &str, report: &str, extra_yaml: &str) -> Running {
    let yaml = format!(
        "nodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: {report}\nnodeLeaseDurationSeconds: 4\nrootDir: /\n{extra_yaml}"
    );
    let (supervisor, addresses) = start_api_actors(&cluster.kubeconfig, name, &yaml).await;
    Running {
        supervisor,
        addresses,
    }
}

async fn get_node(cluster: &TestCluster, name: &str) -> Option<Node> {
    Api::<Node>::all(cluster.client.clone())
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

fn condition(node: &Node, kind: &str) -> Option<(String, String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn wait_for_node(
    cluster: &TestCluster,
    name: &str,
    what: &str,
    check: impl Fn(&Node) -> bool,
) -> Node {
    eventually_async(what, || async {
        get_node(cluster, name)
            .await
            .is_some_and(|node| check(&node))
    })
    .await;
    get_node(cluster, name).await.expect("node")
}

#[actix_rt::test]
async fn registers_the_node_with_this_hosts_facts_and_owns_its_lease() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-register");
    let _node = start_node(&cluster, &name, "5m", "nodeLabels: {team: infra}\n").await;
    let node = wait_for_node(
        &cluster,
        &name,
        "the node is registered with its conditions",
        |node| condition(node, "Ready").is_some(),
    )
    .await;

    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("infra"));
    let status = node.status.clone().expect("status");
    let capacity = status.capacity.clone().expect("capacity");
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    assert_eq!(capacity["cpu"].0, nproc.to_string(), "cpu = nproc");
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let mem_kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("MemTotal");
    assert_eq!(
        nodepulse_actors::quantity::parse_quantity(&capacity["memory"].0).ok(),
        Some((mem_kib * 1024) as f64),
        "memory = MemTotal"
    );
    assert_eq!(capacity["pods"].0, "110");
    assert!(capacity.contains_key("ephemeral-storage"));
    let kinds: Vec<String> = status
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(
        kinds,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    assert_eq!(
        condition(&node, "Ready"),
        Some((
            "False".into(),
            "KubeletNotReady".into(),
            "[container runtime status check may not have completed yet, network state unknown]"
                .into()
        ))
    );
    let info = status.node_info.expect("nodeInfo");
    assert_eq!(
        info.kernel_version,
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .expect("osrelease")
            .trim()
    );
    assert_eq!(
        info.boot_id,
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .expect("boot_id")
            .trim()
    );

    let uid = node.metadata.uid.clone().expect("uid");
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    eventually_async("the lease is created owned by the node", || async {
        leases
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.metadata.owner_references)
            .is_some_and(|owners| owners[0].uid == uid)
    })
    .await;
    cluster.delete_node(&name).await;
}

#[actix_rt::test]
async fn ready_follows_the_runtime_within_a_second_of_the_input() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-ready");
    let node = start_node(&cluster, &name, "5m", "").await;
    wait_for_node(&cluster, &name, "registered", |node| {
        condition(node, "Ready").is_some()
    })
    .await;

    let sent = Instant::now();
    let ready = report_healthy_and_wait_ready(&cluster.client, &name, &node.addresses).await;
    eprintln!("input change → Ready=True in the API: {:?}", sent.elapsed());
    assert_eq!(
        condition(&ready, "Ready"),
        Some((
            "True".into(),
            "KubeletReady".into(),
            "kubelet is posting ready status".into()
        ))
    );
    assert_eq!(
        ready
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.container_runtime_version)
            .as_deref(),
        Some("containerd://1.6.20")
    );

    let broken = RuntimeHealth {
        network_error: Some("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized".into()),
        ..healthy_runtime()
    };
    node.addresses.node_status.try_send(broken).expect("queued");
    let not_ready = wait_for_node(&cluster, &name, "Ready=False again", |node| {
        condition(node, "Ready").is_some_and(|(status, ..)| status == "False")
    })
    .await;
    assert!(
        condition(&not_ready, "Ready").is_some_and(
            |(_, _, message)| message.starts_with("container runtime network not ready")
        )
    );
    cluster.delete_node(&name).await;
}

#[actix_rt::test]
async fn an_existing_node_is_adopted_and_a_deleted_one_registered_again() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-adopt");
    let existing: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "windows", "keep": "me"}}
    }))
    .expect("node");
    let created = Api::<Node>::all(cluster.client.clone())
        .create(&PostParams::default(), &existing)
        .await
        .expect("created");
    let _node = start_node(&cluster, &name, "5m", "").await;
    let adopted = wait_for_node(
        &cluster,
        &name,
        "adopted with its default labels fixed",
        |node| {
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/os"))
                .map(String::as_str)
                == Some("linux")
        },
    )
    .await;
    assert_eq!(
        adopted.metadata.uid, created.metadata.uid,
        "the existing node was adopted, not replaced"
    );
    assert_eq!(
        adopted
            .metadata
            .labels
            .and_then(|l| l.get("keep").cloned())
            .as_deref(),
        Some("me")
    );

    Api::<Node>::all(cluster.client.clone())
        .delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    let again = wait_for_node(&cluster, &name, "registered again after deletion", |node| {
        node.metadata.uid != created.metadata.uid
    })
    .await;
    assert!(condition(&again, "Ready").is_some());
    cluster.delete_node(&name).await;
}

#[actix_rt::test]
async fn nothing_is_patched_while_nothing_changes_until_a_report_is_due() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-quiet");
    let node = start_node(&cluster, &name, "5m", "").await;
    report_healthy_and_wait_ready(&cluster.client, &name, &node.addresses).await;
    // The first report after registration always goes out; what follows must not.
    node.steady().await;
    let steady_node = get_node(&cluster, &name).await.expect("the node");
    let version = steady_node
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");

    // Three status computations (1 s apart) with no change and no report due: no write. Other
    // writers change this Node too (a real kube-controller-manager, and the emulator's likeness
    // of it, drop taints and set the TTL annotation), so only a change of the status, which
    // only nodepulse writes, counts, and on the emulator its request log must hold no PATCH.
    let status_patches = || {
        cluster.emulator.as_ref().map(|emulator| {
            emulator
                .requests()
                .iter()
                .filter(|r| {
                    r.verb == nodepulse_emulator::Verb::Patch
                        && r.resource == "nodes"
                        && r.name == name
                })
                .count()
        })
    };
    let patches_before = status_patches();
    let api = Api::<Node>::all(cluster.client.clone());
    let mut last_status = steady_node.status;
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(4);
    let mut events = api.watch(&params, &version).await.expect("watch").boxed();
    let mut status_changes = 0;
    while let Ok(Some(event)) = tokio::time::timeout(PATIENCE, events.next()).await {
        match event {
            Ok(WatchEvent::Modified(node)) => {
                if node.status != last_status {
                    status_changes += 1;
                    last_status = node.status;
                }
            }
            Ok(_) => {}
            Err(error) => panic!("watch failed: {error}"),
        }
    }
    assert_eq!(status_changes, 0, "no status PATCH while nothing changed");
    assert_eq!(
        status_patches(),
        patches_before,
        "nodepulse sent no PATCH of its Node"
    );
    cluster.delete_node(&name).await;
}

#[actix_rt::test]
async fn a_report_is_sent_when_the_report_frequency_has_passed() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-report");
    let node = start_node(&cluster, &name, "2s", "").await;
    let ready = report_healthy_and_wait_ready(&cluster.client, &name, &node.addresses).await;
    let heartbeat = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_heartbeat_time.clone())
            .map(|t| t.0)
    };
    let first = heartbeat(&ready);
    let reported = wait_for_node(&cluster, &name, "a heartbeat-only report", |node| {
        heartbeat(node) > first
    })
    .await;
    assert_eq!(
        condition(&reported, "Ready").map(|c| c.0).as_deref(),
        Some("True")
    );
    cluster.delete_node(&name).await;
}

/// Stands in for RuntimeProbeActor: records the pod CIDRs it is asked to push.
struct CidrRecorder(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl actix::Actor for CidrRecorder {
    type Context = actix::Context<Self>;
}

impl nodepulse_supervisor::SupervisedActor for CidrRecorder {}

impl actix::Handler<nodepulse_actors::runtime_probe::UpdatePodCidr> for CidrRecorder {
    type Result = bool;

    fn handle(
        &mut self,
        update: nodepulse_actors::runtime_probe::UpdatePodCidr,
        _: &mut actix::Context<Self>,
    ) -> bool {
        self.0
            .lock()
            .map(|mut pushed| pushed.push(update.0))
            .is_ok()
    }
}

#[actix_rt::test]
async fn a_new_pod_cidr_is_pushed_to_the_runtime_once_and_forces_a_status_patch() {
    use std::sync::{Arc, Mutex};

    use kube::api::{Patch, PatchParams};
    use nodepulse_supervisor::{ChildSpec, Supervisor, SupervisorConfig, mailbox};

    let cluster = TestCluster::start().await;
    let name = unique_node_name("status-podcidr");
    let pushed = Arc::new(Mutex::new(Vec::new()));
    let (recorder, recorder_inbox) = mailbox::<CidrRecorder>(8);
    let recorded = Arc::clone(&pushed);
    let _recorder = Supervisor::builder(SupervisorConfig::new("recorder"))
        .child(ChildSpec::new("cidr-recorder", recorder_inbox, move || {
            CidrRecorder(Arc::clone(&recorded))
        }))
        .start();
    let yaml = "nodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 5m\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";
    let (supervisor, addresses) = nodepulse_testkit::node::start_api_actors_with(
        &cluster.kubeconfig,
        &name,
        yaml,
        Some(recorder.recipient()),
    )
    .await;
    let node = Running {
        supervisor,
        addresses,
    };
    report_healthy_and_wait_ready(&cluster.client, &name, &node.addresses).await;
    node.steady().await;
    let heartbeat = |node: &Node| {
        node.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")?
            .last_heartbeat_time
            .clone()
            .map(|t| t.0)
    };
    let before = heartbeat(&get_node(&cluster, &name).await.expect("node"));

    // Heartbeats have whole seconds: let the clock pass the last one, so that a forced report
    // shows (without the force, nothing would be sent: no change and no report due for 5m).
    let last = before.expect("a heartbeat");
    eventually("the clock passed the last heartbeat's second", || {
        jiff::Timestamp::now().as_second() > last.as_second()
    })
    .await;

    // The node-IPAM controller's part: it sets the Node's pod CIDRs.
    let cidr =
        serde_json::json!({"spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}});
    Api::<Node>::all(cluster.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&cidr))
        .await
        .expect("spec patched");

    eventually_async("the pod CIDR reached the runtime", || async {
        pushed.lock().is_ok_and(|pushed| !pushed.is_empty())
    })
    .await;
    let forced = wait_for_node(&cluster, &name, "a forced status PATCH", |node| {
        heartbeat(node) > before
    })
    .await;
    assert_eq!(
        condition(&forced, "Ready").map(|c| c.0).as_deref(),
        Some("True")
    );
    node.steady().await;
    assert_eq!(
        pushed
            .lock()
            .map(|pushed| pushed.clone())
            .unwrap_or_default(),
        ["10.244.1.0/24"],
        "pushed once"
    );
    cluster.delete_node(&name).await;
}
