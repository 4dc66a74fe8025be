//! Containers' `subPath`s on a real `runtime: cri` node (containerd) against a container that
//! shares the volume and swaps the path for a link out of it in a loop (CVE-2017-1002101):
//! no container ever mounts the host's directory, each mounts the volume's own, and the binds
//! nodepulse makes for them go with the pod; binds a killed daemon left go when the restarted
//! one finds the pod deleted.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::DeleteParams};
use serde_json::{Value, json};

use crate::cri_pods::{NAMESPACE, Setup, UNTIL_TERM, shell};
use nodepulse_testkit::{
    PATIENCE,
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::cri_node_config,
    daemon::DaemonProcess,
    eventually, eventually_async,
    objects::pod_events,
    oci_image::BUSYBOX_IMAGE,
    pods::{create, pod_manifest, wait_running},
    poll::eventually_async_within,
    root_dir::RootDir,
};

/// Containers that mount the swapped path, each started once when its subPath is accepted.
const VICTIMS: usize = 16;
/// What the victims may wait: each refused start is tried again after the node's 10 s
/// back-off, and about half of them are refused (the link points out at the check).
const VICTIMS_PATIENCE: Duration = Duration::from_secs(240);
/// The file only the host's directory holds.
const HOST_ONLY: &str = "host-only";

/// A sidecar that makes `dir` and `link -> dir` in the volume, then swaps `link` between
/// `dir` and `host` as fast as it can, each swap one rename so `link` is never missing (a
/// missing one would be made a directory and end the race); every 20 swaps are counted in
/// `swaps`. Started (its startup probe) once `link` is there, so no victim comes before it.
fn swapper(host: &Path) -> Value {
    let script = format!(
        "cd /v && mkdir -p dir && /bin/busybox ln -sfn dir link && i=0
         while :; do
           /bin/busybox ln -sfn dir a && /bin/busybox mv -fT a link
           /bin/busybox ln -sfn {host} b && /bin/busybox mv -fT b link
           i=$((i+1)); [ $((i % 20)) -ne 0 ] || echo $i > swaps
         done",
        host = host.display()
    );
    json!({
        "name": "swapper", "image": BUSYBOX_IMAGE, "restartPolicy": "Always",
        "command": ["/bin/sh", "-c", script],
        "volumeMounts": [{"name": "shared", "mountPath": "/v"}],
        "startupProbe": {"exec": {"command": ["test", "-L", "/v/link"]}, "periodSeconds": 1},
    })
}

/// Leaves its name in what it mounts at `/m` (the volume's `link`), then runs until SIGTERM.
fn victim(index: usize) -> Value {
    let name = format!("victim-{index}");
    let mut container = shell(&name, &format!("touch /m/seen-by-{name}; {UNTIL_TERM}"));
    container["volumeMounts"] = json!([{"name": "shared", "mountPath": "/m", "subPath": "link"}]);
    container
}

/// The names in `dir`, none if it is absent.
fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn pod_dir(root: &Path, pod: &Pod) -> PathBuf {
    root.join("pods")
        .join(pod.metadata.uid.as_deref().expect("a UID"))
}

fn running_victims(pod: &Pod) -> usize {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses
        .into_iter()
        .flatten()
        .filter(|s| s.name.starts_with("victim-"))
        .filter(|s| {
            s.state
                .as_ref()
                .is_some_and(|state| state.running.is_some())
        })
        .count()
}

/// The starts refused because the subPath led out of the volume when it was checked.
async fn refused_starts(cluster: &TestCluster, pod: &Pod) -> i32 {
    let events = pod_events(cluster, pod).await;
    events
        .iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with("Error: failed to prepare subPath"))
        })
        .map(|e| e.count.unwrap_or(1))
        .sum()
}

#[actix_rt::test]
async fn a_sub_path_swapped_for_a_link_out_of_the_volume_in_a_loop_never_mounts_the_host() {
    let test = "a_sub_path_swapped_for_a_link_out_of_the_volume_in_a_loop_never_mounts_the_host";
    let Some(setup) = Setup::start(test, "cri-subpath-race").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    let host = tempfile::Builder::new()
        .prefix("np-subpath-host-")
        .tempdir()
        .expect("the host's directory");
    std::fs::write(host.path().join(HOST_ONLY), b"the host's").expect("the host's file");
    let host_path = std::fs::canonicalize(host.path()).expect("the host's directory");
    node.guard(async {
        let name = format!("{}-race", node.name);
        let victims: Vec<Value> = (0..VICTIMS).map(victim).collect();
        let pod = create(
            &cluster.client,
            &pod_manifest(
                &name,
                NAMESPACE,
                &node.name,
                json!({"spec": {
                    "terminationGracePeriodSeconds": 2,
                    "volumes": [{"name": "shared", "emptyDir": {}}],
                    "initContainers": [swapper(&host_path)],
                    "containers": victims,
                }}),
            ),
        )
        .await;
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let what = format!("all {VICTIMS} victims run, none in the host's directory");
        eventually_async_within(VICTIMS_PATIENCE, &what, || async {
            let seen = names_in(&host_path);
            assert_eq!(
                seen,
                BTreeSet::from([HOST_ONLY.to_owned()]),
                "a container mounted the host's directory"
            );
            pods.get(&name)
                .await
                .is_ok_and(|pod| running_victims(&pod) == VICTIMS)
        })
        .await;

        // Running comes before a victim's shell has left its name: wait for all of them.
        let volume = pod_dir(&node.root_dir(), &pod).join("volumes/kubernetes.io~empty-dir/shared");
        let expected: BTreeSet<String> = (0..VICTIMS)
            .map(|i| format!("seen-by-victim-{i}"))
            .collect();
        eventually("every victim left its name somewhere", || {
            names_in(&volume.join("dir")).len() + names_in(&host_path).len() > VICTIMS
        })
        .await;
        assert_eq!(
            names_in(&host_path),
            BTreeSet::from([HOST_ONLY.to_owned()]),
            "a container mounted the host's directory"
        );
        assert_eq!(
            names_in(&volume.join("dir")),
            expected,
            "each victim mounted the volume's dir"
        );
        let swaps: u64 = std::fs::read_to_string(volume.join("swaps"))
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or_default();
        assert!(swaps >= 20, "the swapper raced the starts ({swaps} swaps)");
        eprintln!(
            "{test}: {swaps} swaps, {} starts refused, {VICTIMS} started",
            refused_starts(cluster, &pod).await
        );

        // The binds go with the pod.
        let binds = pod_dir(&node.root_dir(), &pod).join("volume-subpaths/shared");
        assert_eq!(names_in(&binds).len(), VICTIMS, "one bind per victim");
        pods.delete(&name, &DeleteParams::default())
            .await
            .expect("the pod is deleted");
        let dir = pod_dir(&node.root_dir(), &pod);
        eventually("the pod's directory, binds included, is removed", || {
            !dir.exists()
        })
        .await;
        assert_eq!(
            nodepulse::volume_plugins::mount::mount_points_below(&dir).expect("the mount table"),
            Vec::<PathBuf>::new()
        );
    })
    .await;
}

#[actix_rt::test]
async fn sub_path_binds_a_killed_daemon_left_go_when_the_restarted_one_finds_the_pod_deleted() {
    let test =
        "sub_path_binds_a_killed_daemon_left_go_when_the_restarted_one_finds_the_pod_deleted";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-subpath-restart").await;
    let dir = RootDir::new();
    let node = nodepulse_testkit::cluster::unique_node_name("cri-subpath-restart");
    let yaml = cri_node_config(&fixture, dir.path());
    let root = dir.path().join("root");
    let host = dir.path().join("host-volume");
    std::fs::create_dir_all(host.join("logs")).expect("the hostPath volume");
    let mut daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let name = format!("{node}-app");
    let mut app = shell("app", UNTIL_TERM);
    // An emptyDir, whose directory the restarted daemon finds and tears down, and a hostPath,
    // which leaves none: only the pod directory's clean-up finds its bind.
    app["volumeMounts"] = json!([
        {"name": "scratch", "mountPath": "/scratch", "subPath": "made/by/the/node"},
        {"name": "host", "mountPath": "/logs", "subPath": "logs"},
    ]);
    let pod = create(
        &cluster.client,
        &pod_manifest(
            &name,
            NAMESPACE,
            &node,
            json!({"spec": {
                "terminationGracePeriodSeconds": 1,
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "host", "hostPath": {"path": host.display().to_string()}},
                ],
                "containers": [app],
            }}),
        ),
    )
    .await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let pod_dir = pod_dir(&root, &pod);
    let binds = [
        pod_dir.join("volume-subpaths/scratch/app/0"),
        pod_dir.join("volume-subpaths/host/app/1"),
    ];
    for bind in &binds {
        assert!(
            nodepulse::volume_plugins::mount::is_mount_point(bind).unwrap_or(false),
            "{} is bound",
            bind.display()
        );
    }

    daemon.signal("KILL");
    assert!(
        daemon.wait_exit(PATIENCE).await.is_some(),
        "the daemon ended"
    );
    drop(daemon);
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(&name, &force).await.expect("force delete");
    eventually_async("the force-deleted pod is gone from the API", || async {
        matches!(pods.get_opt(&name).await, Ok(None))
    })
    .await;

    let _daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    eventually(
        "the pod's directory, its binds included, is removed",
        || !pod_dir.exists(),
    )
    .await;
    assert_eq!(
        nodepulse::volume_plugins::mount::mount_points_below(&pod_dir).expect("the mount table"),
        Vec::<PathBuf>::new()
    );
    assert!(host.join("logs").is_dir(), "the hostPath's content stays");
}
