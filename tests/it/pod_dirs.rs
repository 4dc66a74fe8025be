//! A pod's directory `<rootDir>/pods/<uid>` goes with the pod, also when the pod leaves the API
//! without ever reaching a terminal status (a force delete, `--grace-period=0`): on a simulated
//! node, on a CRI node (its containers stopped and removed too), and after a restart, where a
//! directory left for a pod the API no longer has is removed at start — but never one that still
//! has something mounted below it, even a bind mount from the same filesystem.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::DeleteParams};
use nodepulse_actors::ports::{ContainerRuntime, SandboxFilter};
use nodepulse_supervisor::SupervisorHandle;
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    eventually, eventually_async,
    pods::{create, pod_manifest, start_simulated_node, wait_running},
    root_dir::RootDir,
};
use serde_json::{Value, json};

use crate::cri_pods::{Setup, UNTIL_TERM, runtime_containers, shell};

const NAMESPACE: &str = "default";

fn pod_dir(root: &Path, pod: &Pod) -> PathBuf {
    root.join("pods")
        .join(pod.metadata.uid.as_deref().expect("a UID"))
}

/// `containers` with an emptyDir `scratch` mounted in each: a volume the volume manager sets up
/// under the pod's directory, and one no content refresh ever wakes the manager for.
fn with_scratch(name: &str, node: &str, mut containers: Value) -> Pod {
    for container in containers.as_array_mut().expect("a list of containers") {
        container["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
    }
    pod_manifest(
        name,
        NAMESPACE,
        node,
        json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}],
                        "containers": containers}}),
    )
}

/// `kubectl delete pod --force --grace-period=0`: the pod leaves the API at once, Running.
async fn force_delete(cluster: &TestCluster, name: &str) {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(name, &force).await.expect("force delete");
    eventually_async("the force-deleted pod is gone from the API", || async {
        matches!(pods.get_opt(name).await, Ok(None))
    })
    .await;
}

/// Waits until the pod's emptyDir is set up, and writes a container's file into it.
async fn scratch_in_use(root: &RootDir, pod: &Pod) {
    let scratch = pod_dir(root.path(), pod).join("volumes/kubernetes.io~empty-dir/scratch");
    eventually("the pod's emptyDir is set up", || scratch.is_dir()).await;
    std::fs::write(scratch.join("work"), b"data").expect("a container's file");
}

async fn start_node(cluster: &TestCluster, node: &str, root: &RootDir) -> SupervisorHandle {
    let yaml = format!("rootDir: {}\n", root.path().display());
    start_simulated_node(&cluster.kubeconfig, node, &yaml).await
}

async fn stop(supervisor: SupervisorHandle) {
    assert!(
        supervisor.shutdown(Duration::from_secs(10)).await,
        "the node stops"
    );
}

#[actix_rt::test]
async fn a_force_deleted_pod_leaves_no_directory_on_a_simulated_node() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("poddir-force");
    let root = RootDir::new();
    let supervisor = start_node(&cluster, &node, &root).await;
    let name = format!("{node}-app");
    let app = json!([{"name": "app", "image": "registry.k8s.io/pause:3.10"}]);
    let pod = create(&cluster.client, &with_scratch(&name, &node, app)).await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    scratch_in_use(&root, &pod).await;

    force_delete(&cluster, &name).await;
    let dir = pod_dir(root.path(), &pod);
    eventually("the force-deleted pod's directory is gone", || {
        !dir.exists()
    })
    .await;
    stop(supervisor).await;
}

#[actix_rt::test]
async fn a_force_deleted_pod_on_containerd_has_its_containers_removed_and_leaves_no_directory() {
    let test =
        "a_force_deleted_pod_on_containerd_has_its_containers_removed_and_leaves_no_directory";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "cri-force").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-app", node.name);
        let pod = create(
            &cluster.client,
            &with_scratch(&name, &node.name, json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let dir = pod_dir(&node.root_dir(), &pod);
        assert!(dir.is_dir(), "the running pod has its directory");
        assert!(
            !runtime_containers(&fixture, &pod).await.is_empty(),
            "the pod's container runs on containerd"
        );

        force_delete(&cluster, &name).await;
        let uid = pod.metadata.uid.clone().expect("a UID");
        let of_the_pod = SandboxFilter {
            labels: [("io.kubernetes.pod.uid".to_owned(), uid)].into(),
            ..SandboxFilter::default()
        };
        eventually_async(
            "the pod's containers and sandbox are stopped and removed",
            || async {
                let sandboxes = fixture.client.list_pod_sandboxes(of_the_pod.clone()).await;
                runtime_containers(&fixture, &pod).await.is_empty()
                    && sandboxes.is_ok_and(|sandboxes| sandboxes.is_empty())
            },
        )
        .await;
        eventually("the force-deleted pod's directory is gone", || {
            !dir.exists()
        })
        .await;
    })
    .await;
}

#[actix_rt::test]
async fn at_start_a_directory_left_for_a_pod_the_api_no_longer_has_goes_unless_something_is_mounted_below()
 {
    let test = "at_start_a_directory_left_for_a_pod_the_api_no_longer_has_goes_unless_something_is_mounted_below";
    let cluster = TestCluster::start().await;
    let node = unique_node_name("poddir-restart");
    let root = RootDir::new();
    let supervisor = start_node(&cluster, &node, &root).await;
    let name = format!("{node}-app");
    let app = json!([{"name": "app", "image": "registry.k8s.io/pause:3.10"}]);
    let pod = create(&cluster.client, &with_scratch(&name, &node, app)).await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    scratch_in_use(&root, &pod).await;
    // The node is down while its pod is force-deleted: it learns of it only from the disk.
    stop(supervisor).await;
    force_delete(&cluster, &name).await;

    // A directory of another pod long gone, with someone else's data bound below it: the same
    // filesystem, so only the mount table tells it is a mount.
    let theirs = root.path().join("theirs");
    std::fs::create_dir_all(&theirs).expect("their directory");
    std::fs::write(theirs.join("data"), b"not the pod's").expect("their data");
    let bound_orphan = root.path().join("pods/0c1d2e3f-orphan-with-a-mount");
    let bound = bound_orphan.join("containers/app");
    std::fs::create_dir_all(&bound).expect("the orphan's directory");
    let bind = rustix::mount::mount_bind(&theirs, &bound);
    if let Err(error) = &bind {
        nodepulse_testkit::skip::missing(
            &format!("{test} (its bind-mount half)"),
            &format!("permission to bind-mount ({error})"),
        );
    }

    let supervisor = start_node(&cluster, &node, &root).await;
    let dir = pod_dir(root.path(), &pod);
    // Both directories are read back at start and looked at in the first pass after the pod
    // list is complete; the deleted pod's one needs a second pass, after its volume's teardown.
    eventually("the deleted pod's directory is removed at start", || {
        !dir.exists()
    })
    .await;
    if bind.is_ok() {
        assert_eq!(
            std::fs::read(theirs.join("data")).ok().as_deref(),
            Some(&b"not the pod's"[..]),
            "nothing is removed through a mount"
        );
        assert!(
            bound.is_dir(),
            "a pod directory with a mount below it stays"
        );
    }
    stop(supervisor).await;
}
