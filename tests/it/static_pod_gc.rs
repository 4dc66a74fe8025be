//! Static pods across a daemon restart, on a real containerd: a manifest removed while the
//! daemon was down (SIGKILLed, which leaves its pods running, as the kubelet's exit does) takes
//! its pod with it once the restarted daemon has read its sources — containers and sandbox
//! removed, mirror pod deleted — as the kubelet's pod clean-up removes whatever no source has;
//! the pod whose manifest is still there is adopted as it runs, not restarted.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::{
    cri_pods::{app, runtime_id},
    static_pods::{
        HASH, MIRROR, NAMESPACE, annotation, runs, static_containers, static_sandboxes,
        write_manifest,
    },
};
use nodepulse_testkit::{
    PATIENCE,
    cleanup::{Owned, own},
    cluster::{TestCluster, unique_node_name},
    cri_fixture::CriFixture,
    cri_node::cri_node_config,
    daemon::DaemonProcess,
    eventually_async,
    pods::{running_and_ready, wait_pod},
    root_dir::RootDir,
};

/// The mirror pod of manifest pod `name` on `node`, Running and Ready; owned for clean-up.
async fn running_mirror(cluster: &TestCluster, name: &str, node: &str) -> Pod {
    let mirror = format!("{name}-{}", node.to_lowercase());
    own(Owned::Pod {
        namespace: NAMESPACE.to_owned(),
        name: mirror.clone(),
    });
    wait_pod(
        &cluster.client,
        NAMESPACE,
        &mirror,
        "the mirror pod Running",
        |pod| {
            pod.metadata.deletion_timestamp.is_none()
                && annotation(pod, MIRROR).is_some()
                && running_and_ready(pod)
        },
    )
    .await
}

#[actix_rt::test]
async fn a_manifest_removed_while_the_daemon_was_down_stops_its_pod_at_restart() {
    let test = "a_manifest_removed_while_the_daemon_was_down_stops_its_pod_at_restart";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("static-gc").await;
    let dir = RootDir::new();
    let manifests = tempfile::tempdir().expect("a manifest directory");
    let node = unique_node_name("static-gc");
    let yaml = format!(
        "{}staticPodPath: {}\n",
        cri_node_config(&fixture, dir.path()),
        manifests.path().display()
    );
    write_manifest(manifests.path(), "gone", "1");
    write_manifest(manifests.path(), "kept", "1");
    let mut daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let gone = running_mirror(&cluster, "gone", &node).await;
    let kept = running_mirror(&cluster, "kept", &node).await;
    let gone_hash = annotation(&gone, HASH).expect("config.hash").to_owned();
    let kept_container = runtime_id(&app(&kept));
    assert_eq!(static_sandboxes(&fixture, &gone_hash).await, 1);

    daemon.signal("KILL");
    assert!(
        daemon.wait_exit(PATIENCE).await.is_some(),
        "the daemon ended"
    );
    drop(daemon);
    std::fs::remove_file(manifests.path().join("gone.yaml")).expect("the manifest is removed");
    assert_eq!(
        static_containers(&fixture, &gone_hash).await,
        1,
        "nothing removes it while the daemon is down"
    );

    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    eventually_async(
        "the removed manifest's containers and sandbox are gone",
        || async {
            static_containers(&fixture, &gone_hash).await == 0
                && static_sandboxes(&fixture, &gone_hash).await == 0
        },
    )
    .await;
    let mirror = gone.metadata.name.clone().expect("a name");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    eventually_async("its mirror pod is deleted", || async {
        pods.get_opt(&mirror).await.is_ok_and(|pod| pod.is_none())
    })
    .await;
    assert!(
        runs(&fixture, &kept_container).await,
        "the pod whose manifest stayed runs on, adopted"
    );
    let kept_after = running_mirror(&cluster, "kept", &node).await;
    assert_eq!(runtime_id(&app(&kept_after)), kept_container);
    assert_eq!(app(&kept_after).restart_count, 0);
    drop(daemon);
}
