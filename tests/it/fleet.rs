//! A simulated fleet: many nodes in one process, each the same actors as a real node, sharing
//! the API clients, two watches and a bounded pool of threads. Every node becomes Ready with a
//! Lease, is visible and killable through the debug endpoint by `?node=`, and a kill on one
//! node leaves the others undisturbed. No timing goals here: those are the benchmarks'.

use nodepulse::apiserver_client::node::is_ready;
use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, api::ListParams};
use nodepulse::{
    apiserver_client::KubeApi,
    config::{self, Config, FleetNodeConfig, Settings, Source},
    debug::{self, FaultInjectionGate},
    fleet::{Fleet, FleetOptions},
};
use nodepulse_supervisor::ChildState;
use nodepulse_testkit::{
    cleanup,
    cluster::{TestCluster, unique_node_name},
    eventually, eventually_async,
    pods::SIMULATED_FLEET,
};
use serde_json::Value;

const NODES: usize = 50;
const TOKEN: &str = "fleet-test-token-0123456789";

/// The fleet's supervision, after [`SIMULATED_FLEET`]: quick restarts.
const QUICK_RESTARTS: &str = "supervision:
  livenessTimeout: 2s
  livenessInterval: 500ms
  backoff:
    initial: 50ms
";

/// `NODES` nodes named after `base`; the first is listed with its own labels and capacity.
fn settings(cluster: &TestCluster, base: &str) -> Settings {
    let yaml = format!("{SIMULATED_FLEET}{QUICK_RESTARTS}");
    let mut config = Config::parse(&yaml, Source::Embedded).expect("valid fleet configuration");
    let listed = FleetNodeConfig {
        name: format!("{base}-listed"),
        labels: BTreeMap::from([("nodepulse.test/zone".to_owned(), "a".to_owned())]),
        capacity: BTreeMap::from([
            ("cpu".to_owned(), "3".to_owned()),
            ("memory".to_owned(), "6Gi".to_owned()),
        ]),
    };
    config.nodes = config::with_generated(&[listed], base, NODES).expect("enough nodes");
    config
        .node_labels
        .insert(cleanup::RUN_LABEL.to_owned(), cleanup::run_id().to_owned());
    for node in &config.nodes {
        cleanup::own_node(&node.name);
    }
    Settings {
        config,
        node_name: base.to_owned(),
        kubeconfig: Some(cluster.kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    }
}

async fn start(cluster: &TestCluster, base: &str) -> (Settings, Fleet) {
    let settings = settings(cluster, base);
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config)
        .await
        .expect("connects");
    let fleet = Fleet::start(&settings, api, &FleetOptions { arbiters: 2 });
    (settings, fleet)
}

/// Waits until every node of `settings` is Ready=True and has a renewed Lease.
async fn all_ready_with_leases(cluster: &TestCluster, settings: &Settings) {
    let nodes = Api::<Node>::all(cluster.client.clone());
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    let names: Vec<&str> = settings
        .config
        .nodes
        .iter()
        .map(|node| node.name.as_str())
        .collect();
    eventually_async("every node of the fleet is Ready with a Lease", || async {
        let (Ok(listed_nodes), Ok(listed_leases)) = (
            nodes.list(&ListParams::default()).await,
            leases.list(&ListParams::default()).await,
        ) else {
            return false;
        };
        names.iter().all(|name| {
            let ready = listed_nodes
                .items
                .iter()
                .any(|node| node.metadata.name.as_deref() == Some(name) && is_ready(node));
            let renewed = listed_leases.items.iter().any(|lease| {
                lease.metadata.name.as_deref() == Some(name)
                    && lease
                        .spec
                        .as_ref()
                        .and_then(|spec| spec.renew_time.as_ref())
                        .is_some()
            });
            ready && renewed
        })
    })
    .await;
}

#[actix_rt::test]
async fn every_node_of_a_fleet_becomes_ready_with_its_lease_on_shared_threads_and_watches() {
    let cluster = TestCluster::start().await;
    let base = unique_node_name("fleet");
    let (settings, fleet) = start(&cluster, &base).await;
    all_ready_with_leases(&cluster, &settings).await;

    assert_eq!(fleet.handles().len(), NODES);
    assert_eq!(
        fleet.arbiters().threads(),
        2,
        "seven actors per node on two threads"
    );
    assert_eq!(fleet.arbiters().live_instances(), NODES * 7);
    eventually(
        "every node holds one Node stream and one pod stream",
        || fleet.api().watches().subscribers() == (NODES, NODES),
    )
    .await;

    let listed = Api::<Node>::all(cluster.client.clone())
        .get(&format!("{base}-listed"))
        .await
        .expect("the listed node exists");
    let labels = listed.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("nodepulse.test/zone").map(String::as_str),
        Some("a")
    );
    let capacity = listed
        .status
        .as_ref()
        .and_then(|status| status.capacity.clone())
        .unwrap_or_default();
    assert_eq!(capacity.get("cpu").map(|cpu| cpu.0.as_str()), Some("3"));
    let memory = capacity
        .get("memory")
        .and_then(|memory| nodepulse_actors::quantity::parse_quantity(&memory.0).ok());
    assert_eq!(memory, Some(6.0 * f64::from(1_u32 << 30)));
    assert!(
        fleet.shutdown(Duration::from_secs(10)).await,
        "the fleet stops"
    );
}

/// GET or POST `path` at the debug endpoint.
async fn debug_call(address: std::net::SocketAddr, post: bool, path: &str) -> (u16, Value) {
    let client = reqwest::Client::new();
    let url = format!("http://{address}{path}");
    let request = if post {
        client.post(url).bearer_auth(TOKEN)
    } else {
        client.get(url)
    };
    let response = request.send().await.expect("the debug endpoint answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

fn actors(body: &Value) -> Vec<Value> {
    body["actors"].as_array().cloned().unwrap_or_default()
}

#[actix_rt::test]
async fn each_node_is_killable_by_name_and_a_kill_disturbs_no_other_node() {
    let cluster = TestCluster::start().await;
    let base = unique_node_name("fleet");
    let (settings, fleet) = start(&cluster, &base).await;
    let endpoint = debug::start(
        "127.0.0.1:0".parse().expect("an address"),
        fleet.handles().to_vec(),
        FaultInjectionGate::new(true, Some(TOKEN.to_owned())),
        debug::Extras::default(),
    )
    .expect("the debug endpoint starts");
    let address = endpoint.address;
    actix_rt::spawn(endpoint.server);
    all_ready_with_leases(&cluster, &settings).await;

    let (status, everything) = debug_call(address, false, "/debug/actors").await;
    assert_eq!(status, 200);
    assert_eq!(
        actors(&everything).len(),
        NODES * 7,
        "every node's seven actors"
    );
    let victim = config::generated_name(&base, 7);
    let (status, own) = debug_call(address, false, &format!("/debug/actors?node={victim}")).await;
    assert_eq!(status, 200);
    let own = actors(&own);
    assert_eq!(own.len(), 7);
    assert!(own.iter().all(|actor| actor["node"] == victim.as_str()));
    let (status, manager) = debug_call(
        address,
        false,
        &format!("/debug/actors/status-manager?node={victim}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        manager["actorState"]["value"]["syncsAtOnce"],
        config::FLEET_NODE_STATUS_SYNCS.get(),
        "a fleet node's StatusManager syncs fewer pods at once than one node's: {manager}"
    );
    let (status, volumes) = debug_call(
        address,
        false,
        &format!("/debug/actors/volume-manager?node={victim}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        volumes["actorState"]["value"]["fetchesAtOnce"],
        config::FLEET_NODE_VOLUME_FETCHES.get(),
        "a fleet node's VolumeManager fetches a bounded number of volumes' sources at once: {volumes}"
    );
    let (status, _) = debug_call(address, false, "/debug/actors?node=no-such-node").await;
    assert_eq!(status, 404, "an unknown node is named as such");
    let (status, _) = debug_call(address, true, "/debug/actors/lease/kill?mode=panic").await;
    assert_eq!(status, 400, "a kill without ?node= is ambiguous in a fleet");

    let (status, accepted) = debug_call(
        address,
        true,
        &format!("/debug/actors/lease/kill?mode=panic&node={victim}"),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let victim_handle = fleet
        .handles()
        .iter()
        .find(|handle| handle.node() == victim)
        .expect("the victim's supervisor");
    eventually(
        "the victim's lease actor runs again after one restart",
        || {
            victim_handle
                .actor("lease")
                .is_some_and(|lease| lease.state == ChildState::Running && lease.restarts == 1)
        },
    )
    .await;
    let killed_at = jiff::Timestamp::now();
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    eventually_async(
        "the victim's restarted lease actor renews its Lease",
        || async {
            leases
                .get(&victim)
                .await
                .ok()
                .and_then(|lease| lease.spec?.renew_time)
                .is_some_and(|renewed| renewed.0 > killed_at)
        },
    )
    .await;

    for handle in fleet.handles() {
        for actor in handle.actors() {
            let killed = handle.node() == victim && actor.name == "lease";
            assert_eq!(
                (actor.state, actor.restarts),
                (ChildState::Running, u64::from(killed)),
                "{} on {}",
                actor.name,
                handle.node()
            );
        }
    }
    assert!(fleet.shutdown(Duration::from_secs(10)).await);
}

#[test]
fn a_fleet_configuration_is_refused_with_the_field_and_the_reason() {
    let refused = |yaml: &str| {
        Config::parse(yaml, Source::File("fleet.yaml".into()))
            .expect_err("refused")
            .to_string()
    };
    let message = refused("nodes:\n  - name: a\n");
    assert!(
        message.contains("nodes") && message.contains("runtime: simulated"),
        "{message}"
    );
    let message = refused("runtime: simulated\nnodes:\n  - name: a\n  - name: a\n");
    assert!(
        message.contains("nodes[1].name") && message.contains("another node"),
        "{message}"
    );
    let message = refused("runtime: simulated\nnodes:\n  - name: Not_A_Name\n");
    assert!(message.contains("nodes[0].name"), "{message}");
    let message =
        refused("runtime: simulated\nnodes:\n  - name: a\n    capacity:\n      gpu: \"1\"\n");
    assert!(message.contains("nodes[0].capacity.gpu"), "{message}");
    let message =
        refused("runtime: simulated\nnodes:\n  - name: a\n    capacity:\n      memory: lots\n");
    assert!(message.contains("nodes[0].capacity.memory"), "{message}");
    let accepted = Config::parse(
        "runtime: simulated\nnodes:\n  - name: a\n    labels: {zone: x}\n    capacity: {cpu: \"2\", memory: 4Gi}\n",
        Source::Embedded,
    )
    .expect("a valid fleet");
    assert_eq!(accepted.nodes.len(), 1);
}

#[test]
fn nodes_flag_fills_the_fleet_up_to_n_and_needs_a_simulated_runtime() {
    use clap::Parser;
    let directory = tempfile::tempdir().expect("a temp dir");
    let file = directory.path().join("fleet.yaml");
    std::fs::write(
        &file,
        "runtime: simulated\nnodeName: sim\nnodes:\n  - name: first\n",
    )
    .expect("written");
    let cli = nodepulse::cli::Cli::try_parse_from([
        "nodepulse",
        "--config",
        file.to_str().expect("a UTF-8 path"),
        "--nodes",
        "3",
    ])
    .expect("flags parse");
    let settings = cli.settings().expect("valid settings");
    let names: Vec<&str> = settings
        .config
        .nodes
        .iter()
        .map(|node| node.name.as_str())
        .collect();
    assert_eq!(names, ["first", "sim-0", "sim-1"]);

    std::fs::write(&file, "nodeName: sim\n").expect("written");
    let cli = nodepulse::cli::Cli::try_parse_from([
        "nodepulse",
        "--config",
        file.to_str().expect("a UTF-8 path"),
        "--nodes",
        "3",
    ])
    .expect("flags parse");
    let error = cli
        .settings()
        .expect_err("a CRI runtime cannot be a fleet")
        .to_string();
    assert!(
        error.starts_with("--nodes:") && error.contains("runtime: simulated"),
        "{error}"
    );
}

/// `--nodes 1000` alone is a simulated fleet whose shared client gets the kubelet's budget a
/// node, capped (500 QPS, burst 1000); a value in the file still wins; one node keeps 50/100.
#[test]
fn a_fleet_from_the_defaults_is_simulated_with_scaled_api_limits_and_an_explicit_qps_wins() {
    use clap::Parser;
    let settings = |args: &[&str]| {
        let mut argv = vec!["nodepulse", "--node-name", "sim"];
        argv.extend_from_slice(args);
        nodepulse::cli::Cli::try_parse_from(argv)
            .expect("flags parse")
            .settings()
            .expect("valid settings")
    };
    let fleet = settings(&["--standalone", "--nodes", "1000"]);
    assert_eq!(
        fleet.config.runtime,
        nodepulse::config::RuntimeKind::Simulated
    );
    assert_eq!(fleet.config.nodes.len(), 1000);
    assert_eq!(
        (
            fleet.config.effective_api_qps(),
            fleet.config.effective_api_burst()
        ),
        (500, 1000)
    );
    let small = settings(&["--nodes", "3"]);
    assert_eq!(
        (
            small.config.effective_api_qps(),
            small.config.effective_api_burst()
        ),
        (150, 300),
        "50 and 100 a node below the cap"
    );
    let one = settings(&[]);
    assert_eq!(
        (
            one.config.effective_api_qps(),
            one.config.effective_api_burst()
        ),
        (50, 100),
        "one node: the kubelet's defaults"
    );

    let directory = tempfile::tempdir().expect("a temp dir");
    let file = directory.path().join("fleet.yaml");
    std::fs::write(
        &file,
        "runtime: simulated\nkubeAPIQPS: 20\nkubeAPIBurst: 40\n",
    )
    .expect("written");
    let explicit = settings(&["--config", file.to_str().expect("UTF-8"), "--nodes", "1000"]);
    assert_eq!(
        (
            explicit.config.effective_api_qps(),
            explicit.config.effective_api_burst()
        ),
        (20, 40),
        "the file's values win"
    );
}
