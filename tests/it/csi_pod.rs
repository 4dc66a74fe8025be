//! A pod's CSI volume end to end on a whole simulated node: a CSIDriver that needs attaching, a
//! PV bound to a claim, the test CSI plugin registering through `<rootDir>/plugins_registry`,
//! and a pod using the claim. The node reports the volume in `volumesInUse`, the controller
//! creates the VolumeAttachment, the test plays the driver's external attacher (here as on a
//! real cluster), then the node stages and publishes it and the pod runs. Deleting the pod
//! unpublishes and unstages it before the node lets go of it in `volumesInUse`, and only then
//! does the controller detach it — also after the node restarted in between.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::{
    core::v1::{Node, Pod},
    storage::v1::VolumeAttachment,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use nodepulse::volume_plugins::csi::layout::attachment_name;
use nodepulse_supervisor::SupervisorHandle;
use serde_json::json;

use nodepulse_testkit::{
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
const ATTACH_DETACH: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// The node, its driver, the claim's PV and the pod using it.
struct Scene {
    node: String,
    root: nodepulse_testkit::root_dir::RootDir,
    plugin: CsiPlugin,
    pv: String,
    unique: String,
    attachment: String,
    pod: String,
    uid: String,
}

impl Scene {
    async fn start(cluster: &TestCluster, prefix: &str) -> (Self, SupervisorHandle) {
        let node = unique_node_name(prefix);
        let root = nodepulse_testkit::root_dir::RootDir::with_prefix("np-csi");
        let driver = format!("{node}.csi.nodepulse.test");
        let (pv, claim, pod, handle) = (
            format!("{node}-pv"),
            format!("{node}-data"),
            format!("{node}-app"),
            format!("{node}-handle"),
        );
        let attachment = attachment_name(&handle, &driver, &node);
        own_volume_attachment(&attachment);
        own_csi_node(&node);
        let mut plugin = CsiPlugin::start(
            PluginOptions::new(&driver),
            &root.path().join("csi-plugin/csi.sock"),
        );
        plugin.register_in(&root.path().join("plugins_registry"));
        create_csi_driver(&cluster.client, &driver, true).await;
        create_bound_claim(&cluster.client, NAMESPACE, &claim, &pv, &driver, &handle).await;
        let supervisor = start_node(cluster, &node, root.path()).await;
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
        let created = pods::create(&cluster.client, &manifest).await;
        let scene = Self {
            unique: format!("kubernetes.io/csi/{driver}^{handle}"),
            uid: created.metadata.uid.expect("a UID"),
            node,
            root,
            plugin,
            pv,
            attachment,
            pod,
        };
        (scene, supervisor)
    }

    fn publish_dir(&self) -> PathBuf {
        self.root
            .path()
            .join("pods")
            .join(&self.uid)
            .join("volumes/kubernetes.io~csi")
            .join(&self.pv)
            .join("mount")
    }

    async fn volumes_in_use(&self, cluster: &TestCluster) -> Vec<String> {
        Api::<Node>::all(cluster.client.clone())
            .get_opt(&self.node)
            .await
            .expect("Node read")
            .and_then(|node| node.status?.volumes_in_use)
            .unwrap_or_default()
    }

    async fn attachment(&self, cluster: &TestCluster) -> Option<VolumeAttachment> {
        read_attachment(&cluster.client, &self.attachment).await
    }

    /// In use, attached by the test as the external attacher, then the pod runs.
    async fn attach_and_run(&self, cluster: &TestCluster) {
        eventually_async("the node reports the volume in use", || async {
            self.volumes_in_use(cluster).await == [self.unique.clone()]
        })
        .await;
        eventually_async("the controller creates the VolumeAttachment", || async {
            self.attachment(cluster).await.is_some()
        })
        .await;
        assert!(
            self.plugin.volume_calls().is_empty(),
            "nothing staged before the volume is attached: {:?}",
            self.plugin.volume_calls()
        );
        Api::<VolumeAttachment>::all(cluster.client.clone())
            .patch_status(
                &self.attachment,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"attached": true}})),
            )
            .await
            .expect("the attacher reports it attached");
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &self.pod,
            "running",
            running_and_ready,
        )
        .await;
    }

    /// Deletes the pod: unpublished and unstaged before `volumesInUse` lets go, then detached.
    async fn delete_and_release(&self, cluster: &TestCluster) {
        self.delete(cluster, &DeleteParams::default()).await;
        self.released(cluster).await;
    }

    async fn delete(&self, cluster: &TestCluster, params: &DeleteParams) {
        Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
            .delete(&self.pod, params)
            .await
            .expect("the pod is deleted");
    }

    /// Unpublished and unstaged before `volumesInUse` lets go, then detached, nothing left.
    async fn released(&self, cluster: &TestCluster) {
        eventually_async("the node lets go of the volume", || async {
            // The Node first, the plugin's calls after: unstaging must already be recorded.
            let released = self.volumes_in_use(cluster).await.is_empty();
            if released {
                let calls = self.plugin.volume_calls();
                assert_eq!(
                    calls[calls.len().saturating_sub(2)..],
                    ["NodeUnpublishVolume", "NodeUnstageVolume"],
                    "unpublished and unstaged before volumesInUse let go: {calls:?}"
                );
            }
            released
        })
        .await;
        eventually_async("the controller detaches it", || async {
            self.attachment(cluster).await.is_none()
        })
        .await;
        assert!(
            !self.publish_dir().exists(),
            "the publish directory is gone"
        );
        let pod_dir = self.root.path().join("pods").join(&self.uid);
        eventually_async("the pod's directory is removed", || async {
            !pod_dir.exists()
        })
        .await;
    }
}

async fn start_node(cluster: &TestCluster, node: &str, root: &Path) -> SupervisorHandle {
    let yaml = format!("rootDir: {}\n", root.display());
    start_simulated_node(&cluster.kubeconfig, node, &yaml).await
}

async fn stop(supervisor: SupervisorHandle) {
    let stopped = supervisor.shutdown(Duration::from_secs(10));
    assert!(
        tokio::time::timeout(Duration::from_secs(15), stopped)
            .await
            .unwrap_or(false),
        "the node stops"
    );
}

#[actix_rt::test]
async fn a_pods_claim_is_attached_staged_published_and_released_in_the_kubelets_order() {
    let cluster = cluster_with_test_attacher().await;
    let (scene, supervisor) = Scene::start(&cluster, "csi-pod").await;
    eventually_async(
        "the node is registered for controller attach/detach",
        || async {
            Api::<Node>::all(cluster.client.clone())
                .get_opt(&scene.node)
                .await
                .ok()
                .flatten()
                .and_then(|node| node.metadata.annotations?.get(ATTACH_DETACH).cloned())
                .is_some_and(|value| value == "true")
        },
    )
    .await;
    scene.attach_and_run(&cluster).await;
    assert_eq!(
        scene.plugin.volume_calls(),
        ["NodeStageVolume", "NodePublishVolume"]
    );
    let published = scene
        .plugin
        .calls()
        .into_iter()
        .find(|call| call.method == "NodePublishVolume")
        .expect("published");
    assert_eq!(published.volume_id, format!("{}-handle", scene.node));
    assert_eq!(Path::new(&published.target_path), scene.publish_dir());
    assert!(
        scene.publish_dir().is_dir(),
        "the pod's mount directory exists"
    );

    scene.delete_and_release(&cluster).await;
    assert_eq!(scene.plugin.volume_calls().len(), 4, "nothing else");
    stop(supervisor).await;
}

#[actix_rt::test]
async fn after_a_node_restart_the_published_volume_is_read_back_kept_in_use_and_released() {
    let cluster = cluster_with_test_attacher().await;
    let (scene, supervisor) = Scene::start(&cluster, "csi-restart").await;
    scene.attach_and_run(&cluster).await;
    stop(supervisor).await;

    // A new process's actors: nothing in memory, the publish directory on disk.
    let supervisor = start_node(&cluster, &scene.node, scene.root.path()).await;
    let before = scene.plugin.volume_calls().len();
    eventually_async(
        "the node stages and publishes it again (idempotent)",
        || async {
            scene.plugin.volume_calls()[before..] == ["NodeStageVolume", "NodePublishVolume"]
        },
    )
    .await;
    assert_eq!(
        scene.volumes_in_use(&cluster).await,
        std::slice::from_ref(&scene.unique)
    );
    assert!(scene.publish_dir().is_dir(), "still published");
    let unpublished = scene
        .plugin
        .volume_calls()
        .iter()
        .filter(|call| **call == "NodeUnpublishVolume")
        .count();
    assert_eq!(unpublished, 0, "the running pod's volume was not torn down");

    scene.delete_and_release(&cluster).await;
    stop(supervisor).await;
}

#[actix_rt::test]
async fn a_pod_deleted_while_the_node_was_down_has_its_volume_read_back_and_released() {
    let cluster = cluster_with_test_attacher().await;
    let (scene, supervisor) = Scene::start(&cluster, "csi-orphan").await;
    scene.attach_and_run(&cluster).await;
    stop(supervisor).await;
    // Gone for good while no node agent runs: only the disk remembers the volume.
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    scene.delete(&cluster, &force).await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    eventually_async("the pod is gone", || async {
        pods.get_opt(&scene.pod)
            .await
            .is_ok_and(|pod| pod.is_none())
    })
    .await;

    let supervisor = start_node(&cluster, &scene.node, scene.root.path()).await;
    scene.released(&cluster).await;
    assert_eq!(
        scene.plugin.volume_calls(),
        [
            "NodeStageVolume",
            "NodePublishVolume",
            "NodeUnpublishVolume",
            "NodeUnstageVolume"
        ]
    );
    stop(supervisor).await;
}
