//! A pod's CSI volume end to end on a whole simulated node: a CSIDriver that needs attaching, a
//! PV bound to a claim, the test CSI plugin registering through `<rootDir>/plugins_registry`,
//! and a pod using the claim. The node reports the volume in `volumesInUse`, the controller
//! creates the VolumeAttachment, the test plays the driver's external attacher (here as on a
//! real cluster), then the node stages and publishes it and the pod runs. Deleting the pod
//! unpublishes and unstages it before the node lets go of it in `volumesInUse`, and only then
//! does the controller detach it.

use std::{path::Path, time::Duration};

use k8s_openapi::api::{
    core::v1::{Node, Pod},
    storage::v1::VolumeAttachment,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use nodepulse::volume::csi::layout::attachment_name;
use serde_json::json;

use crate::common::{
    cluster::{TestCluster, unique_node_name},
    csi_plugin::{CsiPlugin, PluginOptions},
    eventually_async,
    pods::{self, running_and_ready, start_simulated_node, wait_pod},
    storage::{
        cluster_with_test_attacher, create_bound_claim, create_csi_driver, own_csi_node,
        own_volume_attachment, read_attachment,
    },
};

const NAMESPACE: &str = "default";

async fn volumes_in_use(cluster: &TestCluster, node: &str) -> Vec<String> {
    Api::<Node>::all(cluster.client.clone())
        .get_opt(node)
        .await
        .expect("Node read")
        .and_then(|node| node.status?.volumes_in_use)
        .unwrap_or_default()
}

async fn attachment(cluster: &TestCluster, name: &str) -> Option<VolumeAttachment> {
    read_attachment(&cluster.client, name).await
}

/// A `rootDir` for the node, removed with the test.
fn root_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("np-csi")
        .tempdir()
        .expect("a rootDir")
}

fn publish_dir(root: &Path, pod_uid: &str, pv: &str) -> std::path::PathBuf {
    root.join("pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~csi")
        .join(pv)
        .join("mount")
}

#[actix_rt::test]
async fn a_pods_claim_is_attached_staged_published_and_released_in_the_kubelets_order() {
    // The controller attaches nothing by itself: the test is the external attacher.
    let cluster = cluster_with_test_attacher().await;
    let node = unique_node_name("csi-pod");
    let root = root_dir();
    let driver = format!("{node}.csi.nodepulse.test");
    let (pv, claim, pod_name, handle) = (
        format!("{node}-pv"),
        format!("{node}-data"),
        format!("{node}-app"),
        format!("{node}-handle"),
    );
    let attachment_name = attachment_name(&handle, &driver, &node);
    own_volume_attachment(&attachment_name);
    own_csi_node(&node);
    let unique = format!("kubernetes.io/csi/{driver}^{handle}");

    let mut plugin = CsiPlugin::start(
        PluginOptions::new(&driver),
        &root.path().join("csi-plugin/csi.sock"),
    );
    plugin.register_in(&root.path().join("plugins_registry"));
    create_csi_driver(&cluster.client, &driver, true).await;
    create_bound_claim(&cluster.client, NAMESPACE, &claim, &pv, &driver, &handle).await;
    let supervisor = start_simulated_node(
        &cluster.kubeconfig,
        &node,
        &format!("rootDir: {}\n", root.path().display()),
    )
    .await;

    let manifest = pods::pod_manifest(
        &pod_name,
        NAMESPACE,
        &node,
        json!({"spec": {
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        }}),
    );
    let pod = pods::create(&cluster.client, &manifest).await;
    let uid = pod.metadata.uid.clone().expect("a UID");

    eventually_async(
        "the node is registered for controller attach/detach",
        || async {
            Api::<Node>::all(cluster.client.clone())
                .get_opt(&node)
                .await
                .ok()
                .flatten()
                .and_then(|node| node.metadata.annotations)
                .is_some_and(|annotations| {
                    annotations
                        .get("volumes.kubernetes.io/controller-managed-attach-detach")
                        .is_some_and(|value| value == "true")
                })
        },
    )
    .await;
    eventually_async("the node reports the volume in use", || async {
        volumes_in_use(&cluster, &node).await == [unique.clone()]
    })
    .await;
    eventually_async("the controller creates the VolumeAttachment", || async {
        attachment(&cluster, &attachment_name).await.is_some()
    })
    .await;
    assert!(
        plugin.volume_calls().is_empty(),
        "nothing staged before the volume is attached: {:?}",
        plugin.volume_calls()
    );
    Api::<VolumeAttachment>::all(cluster.client.clone())
        .patch_status(
            &attachment_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"attached": true}})),
        )
        .await
        .expect("the attacher reports it attached");

    wait_pod(
        &cluster.client,
        NAMESPACE,
        &pod_name,
        "running",
        running_and_ready,
    )
    .await;
    assert_eq!(
        plugin.volume_calls(),
        ["NodeStageVolume", "NodePublishVolume"]
    );
    let publish = publish_dir(root.path(), &uid, &pv);
    let published = plugin
        .calls()
        .into_iter()
        .find(|call| call.method == "NodePublishVolume")
        .expect("published");
    assert_eq!(published.volume_id, handle);
    assert_eq!(Path::new(&published.target_path), publish);
    assert!(publish.is_dir(), "the pod's mount directory exists");

    Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
        .delete(&pod_name, &DeleteParams::default())
        .await
        .expect("the pod is deleted");
    eventually_async("the node lets go of the volume", || async {
        // The Node first, the plugin's calls after: unstaging must already be recorded.
        let released = volumes_in_use(&cluster, &node).await.is_empty();
        if released {
            assert_eq!(
                plugin.volume_calls(),
                [
                    "NodeStageVolume",
                    "NodePublishVolume",
                    "NodeUnpublishVolume",
                    "NodeUnstageVolume"
                ],
                "unpublished and unstaged before volumesInUse let go"
            );
        }
        released
    })
    .await;
    eventually_async("the controller detaches it", || async {
        attachment(&cluster, &attachment_name).await.is_none()
    })
    .await;
    assert!(!publish.exists(), "the publish directory is gone");
    let pod_dir = root.path().join("pods").join(&uid);
    eventually_async("the pod's directory is removed", || async {
        !pod_dir.exists()
    })
    .await;
    assert!(
        tokio::time::timeout(
            Duration::from_secs(10),
            supervisor.shutdown(Duration::from_secs(10))
        )
        .await
        .unwrap_or(false),
        "the node stops"
    );
}
