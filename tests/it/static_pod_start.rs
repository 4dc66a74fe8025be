//! When a static pod may start (issue 27), with real containers (containerd): an edited
//! manifest's new pod starts its containers only once the old instance is gone (the kubelet's
//! one instance per full name), shown by a lock both would take in a shared hostPath; and a
//! node whose API server was never reachable runs its static pods (admitted against the
//! locally built Node, as a kubeadm control plane starts its kube-apiserver).

use std::path::Path;

use nodepulse_actors::ports::{ContainerFilter, ContainerRuntime, ContainerState};
use serde_json::json;

use crate::static_pods::{
    HASH, NAMESPACE, StaticSetup, annotation, static_containers, wait_mirror, write_pod,
};
use nodepulse_testkit::{
    cleanup::{RUN_LABEL, run_id},
    cri_fixture::CriFixture,
    cri_node::CriNode,
    eventually_async,
    oci_image::BUSYBOX_IMAGE,
};

/// A container that takes the lock `/shared/lock` (a directory: `mkdir` is atomic) and says
/// in `/shared/started-$VERSION` whether it was free; on SIGTERM it drains for 5 s (as a
/// kube-apiserver's shutdown delay), then touches `/shared/released-$VERSION`, lets the lock
/// go and exits.
const TAKES_THE_LOCK: &str = "if mkdir /shared/lock; then held=alone; else held=overlapped; fi; \
     trap '/bin/busybox sleep 5; touch /shared/released-$VERSION; /bin/busybox rmdir /shared/lock; exit 0' TERM; \
     echo $held > /shared/started-$VERSION; while :; do sleep 3600 & wait $!; done";

fn locking_pod(name: &str, version: &str, shared: &Path) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {RUN_LABEL: run_id()}},
        "spec": {
            "terminationGracePeriodSeconds": 30,
            "volumes": [{"name": "shared", "hostPath": {"path": shared, "type": "Directory"}}],
            "containers": [{
                "name": "app", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", TAKES_THE_LOCK],
                "env": [{"name": "VERSION", "value": version}],
                "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
            }],
        },
    })
}

fn started(shared: &Path, version: &str) -> Option<String> {
    let text = std::fs::read_to_string(shared.join(format!("started-{version}"))).ok()?;
    Some(text.trim().to_owned()).filter(|text| !text.is_empty())
}

#[actix_rt::test]
async fn an_edited_manifests_pod_starts_its_containers_only_once_the_old_pod_is_gone() {
    let test = "an_edited_manifests_pod_starts_its_containers_only_once_the_old_pod_is_gone";
    let Some(setup) = StaticSetup::start(test, "static-turn").await else {
        return;
    };
    let shared = tempfile::tempdir().expect("a shared directory");
    let node = &setup.node;
    node.guard(async {
        let mirror_name = setup.mirror_name("locker");
        let dir = setup.manifests.path();
        write_pod(dir, "locker", &locking_pod("locker", "1", shared.path()));
        let first = wait_mirror(&setup, &mirror_name, "the first pod Running", |_| true).await;
        let old_hash = annotation(&first, HASH).expect("config.hash").to_owned();
        eventually_async("the first container holds the lock", || async {
            started(shared.path(), "1").is_some()
        })
        .await;
        assert_eq!(started(shared.path(), "1").as_deref(), Some("alone"));

        // The edit: a new pod of the same name, which must wait for the old one's 5 s drain.
        write_pod(dir, "locker", &locking_pod("locker", "2", shared.path()));
        eventually_async("the new pod's container started", || async {
            started(shared.path(), "2").is_some()
        })
        .await;
        assert_eq!(
            started(shared.path(), "2").as_deref(),
            Some("alone"),
            "the new pod's container started while the old one still held the lock"
        );
        assert_eq!(
            static_containers(&setup.fixture, &old_hash).await,
            0,
            "the old pod's containers were gone when the new one started"
        );
        let modified = |name: &str| {
            let path = shared.path().join(name);
            std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .expect("a file's time")
        };
        let after_release = modified("started-2").duration_since(modified("released-1"));
        eprintln!("the new container started {after_release:?} after the old one let go");
        wait_mirror(
            &setup,
            &mirror_name,
            "the new pod's mirror Running",
            |pod| annotation(pod, HASH).is_some_and(|hash| hash != old_hash),
        )
        .await;
        std::fs::remove_file(dir.join("locker.yaml")).expect("removed");
        setup.wait_mirror_deleted(&mirror_name).await;
    })
    .await;
}

/// A kubeconfig whose API server refuses every connection (a loopback port nothing listens
/// on): the node never reaches an API server, whichever cluster the tests run against.
fn unreachable_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters: [{{name: gone, cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}}}]
users: [{{name: node, user: {{token: never-used}}}}]
contexts: [{{name: gone, context: {{cluster: gone, user: node}}}}]
current-context: gone
"
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig).expect("the kubeconfig is written");
    path
}

#[actix_rt::test]
async fn a_node_whose_api_server_was_never_reachable_runs_its_static_pods() {
    let test = "a_node_whose_api_server_was_never_reachable_runs_its_static_pods";
    if CriFixture::required(test).is_none() {
        return;
    }
    let fixture = CriFixture::start("static-no-api").await;
    let config = tempfile::tempdir().expect("a directory");
    let manifests = tempfile::tempdir().expect("a manifest directory");
    crate::static_pods::write_manifest(manifests.path(), "apiserver", "1");
    let path = manifests.path().to_owned();
    let node = CriNode::start_with(
        &unreachable_kubeconfig(config.path()),
        &fixture,
        "static-no-api",
        |_| format!("staticPodPath: {}\n", path.display()),
    )
    .await;
    let pod_name = format!("apiserver-{}", node.name.to_lowercase());
    node.guard(async {
        eventually_async(
            "the static pod's container runs without an API server",
            || async {
                let filter = ContainerFilter {
                    state: Some(ContainerState::Running),
                    labels: [("io.kubernetes.pod.name".to_owned(), pod_name.clone())].into(),
                    ..ContainerFilter::default()
                };
                fixture
                    .client
                    .list_containers(filter)
                    .await
                    .is_ok_and(|running| running.len() == 1)
            },
        )
        .await;
    })
    .await;
}
