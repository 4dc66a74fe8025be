//! The suite's own clean-up (testkit/src/cleanup.rs), against the emulator or a real cluster:
//! a test that fails still deletes what it made, pods bound to a node without an agent
//! included, and the leftover check sees what is left. And the check of the whole suite
//! (testkit/src/leftovers.rs): its two entry points, which `scripts/test.sh` runs before
//! and after the suite, and a test that it names what a run left on the host; and a CRI node's
//! fixture detaching the mounts nodepulse leaves in place when it stops.

use std::{
    io::Write,
    os::unix::{ffi::OsStrExt, process::CommandExt},
    path::PathBuf,
};

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use kube::{Api, api::PostParams};
use nodepulse_testkit::{
    cleanup::{self, Cleanup, Owned},
    cluster::{TestCluster, unique_node_name},
    leftovers::{self, HostPaths},
    pods::{create, pod_manifest, running_and_ready, wait_pod},
};
use serde_json::json;

use crate::cri_pods::{Setup, UNTIL_TERM, shell};

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

/// The file `scripts/test.sh` keeps the before-the-suite snapshot in.
fn baseline_file() -> Option<PathBuf> {
    std::env::var_os("NODEPULSE_LEFTOVERS_BASELINE").map(PathBuf::from)
}

/// The host's, and the real cluster's when the suite runs against one.
async fn snapshot_of_everything() -> leftovers::Snapshot {
    let mut snapshot = leftovers::host_snapshot(&HostPaths::of_this_host());
    if nodepulse_testkit::skip::on_real_cluster() {
        let cluster = TestCluster::start().await;
        snapshot.extend(leftovers::cluster_snapshot(&cluster.client).await);
    }
    snapshot
}

/// Not a test: `scripts/test.sh` runs it before the suite, to know what was there already.
#[actix_rt::test]
#[ignore = "run by scripts/test.sh before the suite"]
async fn record_what_the_host_and_cluster_hold_before_the_suite() {
    let file = baseline_file().expect("NODEPULSE_LEFTOVERS_BASELINE names the snapshot file");
    let snapshot = snapshot_of_everything().await;
    std::fs::write(&file, serde_json::to_vec(&snapshot).expect("a snapshot"))
        .unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
}

/// Not a test: `scripts/test.sh` runs it after the suite. Lists what the suite left, past the
/// harness's capture; with `CI` set, anything left fails it.
#[actix_rt::test]
#[ignore = "run by scripts/test.sh after the suite"]
async fn the_suite_left_nothing_on_the_host_or_in_the_cluster() {
    let file = baseline_file().expect("NODEPULSE_LEFTOVERS_BASELINE names the snapshot file");
    let before: leftovers::Snapshot = std::fs::read(&file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("no snapshot in {}", file.display()));
    // A shim or a CNI teardown may still be finishing as the last test returns: what is left
    // is what is still there once the host has had a few seconds to settle.
    let settle = std::time::Instant::now();
    let mut left = leftovers::new_since(&before, &snapshot_of_everything().await);
    while !left.is_empty() && settle.elapsed() < std::time::Duration::from_secs(15) {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        left = leftovers::new_since(&before, &snapshot_of_everything().await);
    }
    let report: String = left.iter().map(|line| format!("LEFT {line}\n")).collect();
    let _ = std::io::stderr().write_all(report.as_bytes());
    assert!(
        left.is_empty() || !nodepulse_testkit::skip::in_ci(),
        "the suite left {} things on the host or in the cluster (the LEFT lines)",
        left.len()
    );
}

#[test]
fn the_host_leftover_check_names_what_a_run_left_and_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let paths = HostPaths {
        tmp: dir.path().join("tmp"),
        netns: dir.path().join("run/netns"),
        cni_leases: dir.path().join("cni/nodepulse-test"),
    };
    for made in [&paths.tmp, &paths.netns, &paths.cni_leases] {
        std::fs::create_dir_all(made).expect("a fixture directory");
    }
    std::fs::write(paths.cni_leases.join("lock"), b"").expect("host-local's lock");
    std::fs::create_dir_all(paths.tmp.join("unrelated")).expect("someone else's directory");
    let before = leftovers::host_snapshot(&paths);
    assert_eq!(leftovers::new_since(&before, &before), Vec::<String>::new());

    // What a run that cleaned up badly leaves.
    let runtime = paths.tmp.join("np-ctdAbC123");
    std::fs::create_dir_all(&runtime).expect("a runtime directory");
    let pods = paths.tmp.join(".tmpXyZ/root/pods/0d1c-uid");
    std::fs::create_dir_all(&pods).expect("a pod directory");
    std::fs::write(paths.netns.join("cni-1234"), b"").expect("a netns");
    std::fs::write(paths.cni_leases.join("198.18.0.77"), b"ctr-id").expect("a lease");
    std::fs::write(paths.cni_leases.join("last_reserved_ip.0"), b"").expect("bookkeeping");
    // A process named after the runtime's socket, as a shim's command line names it.
    let shim_name = runtime.join("containerd.sock");
    let mut shim = std::process::Command::new("sleep")
        .arg0(&shim_name)
        .arg("60")
        .spawn()
        .expect("a stand-in shim");
    // Until it has exec'd, the child's command line is still this test binary's.
    let cmdline = format!("/proc/{}/cmdline", shim.id());
    let named = shim_name.as_os_str().as_bytes();
    let deadline = std::time::Instant::now() + nodepulse_testkit::PATIENCE;
    while !std::fs::read(&cmdline).is_ok_and(|line| line.starts_with(named)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the stand-in shim never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let bound = std::fs::create_dir_all(paths.tmp.join(".tmpXyZ/mnt"))
        .map_err(drop)
        .and_then(|()| {
            rustix::mount::mount_bind(&runtime, paths.tmp.join(".tmpXyZ/mnt")).map_err(drop)
        })
        .is_ok();
    let left = leftovers::new_since(&before, &leftovers::host_snapshot(&paths));
    if bound {
        let _ = nodepulse::volume_plugins::mount::detach_all_below(&paths.tmp);
    }
    let _ = shim.kill();
    let _ = shim.wait();

    let mut expected = vec![
        "CNI lease: 198.18.0.77".to_owned(),
        "netns: cni-1234".to_owned(),
        format!(
            "process of a test containerd: {}: {} 60",
            shim.id(),
            shim_name.display()
        ),
        "temporary directory: .tmpXyZ (with pod directories)".to_owned(),
        "temporary directory: np-ctdAbC123".to_owned(),
    ];
    if bound {
        expected.insert(
            1,
            format!("mount: {}", paths.tmp.join(".tmpXyZ/mnt").display()),
        );
    } else {
        nodepulse_testkit::skip::missing(
            "the_host_leftover_check_names_what_a_run_left_and_nothing_else (its mount)",
            "permission to bind-mount",
        );
    }
    assert_eq!(left, expected);
}

/// nodepulse leaves its pods' mounts in place when it stops, as the kubelet does: the node
/// fixture detaches them, or every CRI test with a tmpfs volume leaves one on the host.
#[actix_rt::test]
async fn a_cri_nodes_tmpfs_volumes_are_detached_when_its_fixture_ends() {
    let test = "a_cri_nodes_tmpfs_volumes_are_detached_when_its_fixture_ends";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cleanup-cri").await
    else {
        return;
    };
    let root = node.root_dir();
    let mounts =
        || nodepulse::volume_plugins::mount::mount_points_below(&root).expect("the mount table");
    node.guard(async {
        let name = format!("{}-app", node.name);
        let mut app = shell("app", UNTIL_TERM);
        app["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
        create(
            &cluster.client,
            &pod_manifest(
                &name,
                "default",
                &node.name,
                json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}],
                                "containers": [app]}}),
            ),
        )
        .await;
        wait_pod(
            &cluster.client,
            "default",
            &name,
            "Running",
            running_and_ready,
        )
        .await;
        assert!(!mounts().is_empty(), "the pod's memory volume is a tmpfs");
    })
    .await;
    drop(node);
    assert_eq!(mounts(), Vec::<PathBuf>::new(), "nothing stays mounted");
}
