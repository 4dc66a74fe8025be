//! A pod's claim resolved through the API as the kubelet's populator does it: claim → bound
//! PV → CSI volume, attach requirement from the CSIDriver, publish context from the
//! VolumeAttachment; and the kubelet's texts for a claim that is missing or not bound. Runs
//! unchanged against a real cluster.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::{core::v1::PersistentVolumeClaim, storage::v1::VolumeAttachment};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Source},
};
use nodepulse_actors::{
    volume_manager::{ClaimRef, attachment_name},
    volume_manager::{StorageApi, resolve_claim},
};
use serde_json::json;

use nodepulse_testkit::{
    cleanup::{Owned, own},
    cluster::{TestCluster, unique_node_name},
    storage::{create_bound_claim, create_csi_driver, own_volume_attachment},
};

const NAMESPACE: &str = "default";

async fn storage_api(cluster: &TestCluster) -> Arc<dyn StorageApi> {
    let config = Config::parse("kubeAPIQPS: 50\nkubeAPIBurst: 100\n", Source::Embedded)
        .expect("a valid configuration");
    KubeApi::connect(Some(&cluster.kubeconfig), &config)
        .await
        .expect("connects")
}

fn claim(name: &str) -> ClaimRef<'_> {
    ClaimRef {
        namespace: NAMESPACE,
        claim: name,
        read_only: false,
    }
}

#[tokio::test]
async fn a_bound_claim_resolves_to_its_csi_volume_and_the_attachments_publish_context() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("csi-claim");
    let (driver, handle, pv, node) = (
        format!("{name}.csi.nodepulse.test"),
        format!("{name}-handle"),
        format!("{name}-pv"),
        format!("{name}-node"),
    );
    create_csi_driver(&cluster.client, &driver, true).await;
    create_bound_claim(&cluster.client, NAMESPACE, &name, &pv, &driver, &handle).await;
    // The attacher's answer: an attachment with its metadata, as ControllerPublish returned it.
    let attachment = attachment_name(&handle, &driver, &node);
    own_volume_attachment(&attachment);
    let attachments = Api::<VolumeAttachment>::all(cluster.client.clone());
    attachments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": attachment}, "spec": {
                "attacher": driver, "nodeName": node, "source": {"persistentVolumeName": pv}}}))
            .expect("an attachment"),
        )
        .await
        .expect("the attachment is created");
    attachments
        .patch_status(
            &attachment,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"attached": true, "attachmentMetadata": {"devicePath": "/dev/np0"}}})),
        )
        .await
        .expect("attached");

    let resolved = resolve_claim(storage_api(&cluster).await, claim(&name), &node)
        .await
        .expect("resolves");
    assert!(resolved.attachable);
    assert_eq!(
        resolved.unique_name.as_str(),
        format!("kubernetes.io/csi/{driver}^{handle}")
    );
    assert_eq!(resolved.volume.driver, driver);
    assert_eq!(resolved.volume.volume_handle, handle);
    assert_eq!(resolved.volume.pv_name, pv);
    assert_eq!(resolved.volume.access_mode, "ReadWriteOnce");
    assert_eq!(
        resolved.volume.publish_context,
        BTreeMap::from([("devicePath".to_owned(), "/dev/np0".to_owned())])
    );
}

#[tokio::test]
async fn a_missing_or_unbound_claim_is_refused_with_the_kubelets_text() {
    let cluster = TestCluster::start().await;
    let api = storage_api(&cluster).await;
    let missing = unique_node_name("csi-missing");
    let error = resolve_claim(Arc::clone(&api), claim(&missing), "n")
        .await
        .expect_err("no such claim");
    assert_eq!(
        error.to_string(),
        format!(
            "error processing PVC {NAMESPACE}/{missing}: failed to fetch PVC from API server: persistentvolumeclaims \"{missing}\" not found"
        )
    );

    let pending = unique_node_name("csi-pending");
    own(Owned::Object {
        path: format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{pending}"),
    });
    Api::<PersistentVolumeClaim>::namespaced(cluster.client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": pending}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                "resources": {"requests": {"storage": "1Gi"}}}}))
            .expect("a claim"),
        )
        .await
        .expect("the claim is created");
    let error = resolve_claim(api, claim(&pending), "n")
        .await
        .expect_err("not bound");
    assert_eq!(
        error.to_string(),
        format!(
            "error processing PVC {NAMESPACE}/{pending}: PVC {NAMESPACE}/{pending} has non-bound phase (\"Pending\") or empty pvc.Spec.VolumeName (\"\")"
        )
    );
}
