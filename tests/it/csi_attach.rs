//! The attach handshake the volume manager relies on, from the node's side: a pod bound to a
//! node that lets the controller attach, using a claim bound to a CSI PV whose CSIDriver needs
//! attaching, gets its VolumeAttachment (`csi-<sha256(handle+driver+node)>`); once the attacher
//! reports it attached, the node's `volumesAttached` lists it; after the pod goes, it is
//! detached only when the node's `volumesInUse` no longer names it. The test plays the node
//! (annotation, CSINode, `volumesInUse`) and, in the first test, the external attacher, so it
//! runs unchanged against kube-controller-manager on a real cluster.

use k8s_openapi::api::{core::v1::Node, storage::v1::VolumeAttachment};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use nodepulse::volume_plugins::csi::layout::attachment_name;
use serde_json::json;

use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    eventually_async, pods,
    skip::skipped,
    storage::{
        cluster_with_test_attacher, create_bound_claim, create_csi_driver, create_csi_node,
        own_volume_attachment, read_attachment,
    },
};

const NAMESPACE: &str = "default";
const MANAGED: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// A node that lets the controller attach, a driver needing attach, a bound CSI claim and a pod
/// using it.
struct Scene {
    node: String,
    driver: String,
    pv: String,
    unique: String,
    attachment: String,
    pod: String,
}

async fn scene(cluster: &TestCluster, prefix: &str) -> Scene {
    let node = unique_node_name(prefix);
    cluster.create_node(&node).await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {MANAGED: "true"}}})),
        )
        .await
        .expect("the node lets the controller attach");
    let driver = format!("{node}.csi.nodepulse.test");
    let handle = format!("{node}-handle");
    let (pv, claim, pod) = (
        format!("{node}-pv"),
        format!("{node}-data"),
        format!("{node}-app"),
    );
    let attachment = attachment_name(&handle, &driver, &node);
    own_volume_attachment(&attachment);
    create_csi_driver(&cluster.client, &driver, true).await;
    create_csi_node(&cluster.client, &node, &driver, &format!("{node}-id")).await;
    create_bound_claim(&cluster.client, NAMESPACE, &claim, &pv, &driver, &handle).await;
    let manifest = pods::pod_manifest(
        &pod,
        NAMESPACE,
        &node,
        json!({"spec": {
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        }}),
    );
    pods::create(&cluster.client, &manifest).await;
    Scene {
        unique: format!("kubernetes.io/csi/{driver}^{handle}"),
        node,
        driver,
        pv,
        attachment,
        pod,
    }
}

async fn attachment(cluster: &TestCluster, name: &str) -> Option<VolumeAttachment> {
    read_attachment(&cluster.client, name).await
}

async fn volumes_attached(cluster: &TestCluster, node: &str) -> Vec<(String, String)> {
    let node = Api::<Node>::all(cluster.client.clone())
        .get(node)
        .await
        .expect("Node read");
    node.status
        .and_then(|status| status.volumes_attached)
        .unwrap_or_default()
        .into_iter()
        .map(|volume| (volume.name, volume.device_path))
        .collect()
}

async fn set_volumes_in_use(cluster: &TestCluster, node: &str, volumes: &[&str]) {
    Api::<Node>::all(cluster.client.clone())
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"volumesInUse": volumes}})),
        )
        .await
        .expect("volumesInUse written");
}

#[tokio::test]
async fn a_pods_csi_volume_is_attached_and_detached_only_after_it_leaves_volumes_in_use() {
    // The test plays the external attacher, here as on a real cluster.
    let cluster = cluster_with_test_attacher().await;
    let scene = scene(&cluster, "csi-attach").await;

    eventually_async("the controller creates the VolumeAttachment", || async {
        attachment(&cluster, &scene.attachment).await.is_some()
    })
    .await;
    let created = attachment(&cluster, &scene.attachment)
        .await
        .expect("created");
    assert_eq!(created.spec.node_name, scene.node);
    assert_eq!(created.spec.attacher, scene.driver);
    assert_eq!(
        created.spec.source.persistent_volume_name.as_ref(),
        Some(&scene.pv)
    );
    assert!(
        volumes_attached(&cluster, &scene.node).await.is_empty(),
        "not attached yet"
    );

    set_volumes_in_use(&cluster, &scene.node, &[&scene.unique]).await;
    Api::<VolumeAttachment>::all(cluster.client.clone())
        .patch_status(
            &scene.attachment,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"attached": true}})),
        )
        .await
        .expect("the attacher reports it attached");
    eventually_async("the node lists the volume as attached", || async {
        volumes_attached(&cluster, &scene.node).await == [(scene.unique.clone(), String::new())]
    })
    .await;

    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(cluster.client.clone(), NAMESPACE)
        .delete(
            &scene.pod,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("the pod is deleted");
    // Still in use: the controller must wait; the node clearing volumesInUse releases it.
    set_volumes_in_use(&cluster, &scene.node, &[]).await;
    eventually_async("the volume is detached and no longer listed", || async {
        attachment(&cluster, &scene.attachment).await.is_none()
            && volumes_attached(&cluster, &scene.node).await.is_empty()
    })
    .await;
}

#[tokio::test]
async fn the_emulator_plays_the_attacher_for_a_driver_registered_on_the_node() {
    let cluster = TestCluster::start().await;
    if !cluster.is_emulator() {
        skipped(
            "csi_attach::the_emulator_plays_the_attacher_for_a_driver_registered_on_the_node",
            "the emulator's stand-in for the driver's external attacher",
        );
        return;
    }
    let scene = scene(&cluster, "csi-attacher").await;
    eventually_async(
        "the attachment is attached and listed on the node",
        || async {
            let attached = attachment(&cluster, &scene.attachment)
                .await
                .and_then(|attachment| attachment.status)
                .is_some_and(|status| status.attached);
            attached
                && volumes_attached(&cluster, &scene.node).await
                    == [(scene.unique.clone(), String::new())]
        },
    )
    .await;
}
