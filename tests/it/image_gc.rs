//! Image garbage collection on a private containerd, with thresholds no filesystem escapes
//! (collect from 1 % usage, down to 0 %): the unused images are removed least recently used
//! first, the image a container uses and the pinned sandbox image stay, and since 0 % cannot be
//! reached the kubelet's `FreeDiskSpaceFailed` and, on the second failure, `ImageGCFailed`
//! events are recorded on the Node.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::DeleteParams};
use nodepulse_actors::{image_gc, ports::ContainerRuntime};
use nodepulse_testkit::{
    cluster::TestCluster, cri_fixture::CriFixture, cri_node::CriNode, eventually_async, objects,
    oci_image, pods::wait_running,
};
use serde_json::{Value, json};

use super::cri_pods::{NAMESPACE, UNTIL_TERM, create_pod, shell, spec};

const OLDER: &str = "nodepulse.test/gc-older:1";
const NEWER: &str = "nodepulse.test/gc-newer:1";

const GC_SETTINGS: &str = "imageGCHighThresholdPercent: 1
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 20s
imageGCPeriod: 500ms
";

async fn gc_state(node: &CriNode) -> Value {
    node.supervisor
        .actor_state(image_gc::NAME, Duration::from_secs(5))
        .await
        .expect("the image GC actor answers")
}

fn has_image(state: &Value, tag: &str) -> bool {
    state["images"]
        .as_array()
        .is_some_and(|images| images.iter().any(|image| image["name"] == tag))
}

#[actix_rt::test]
async fn unused_images_are_collected_oldest_first_keeping_used_and_pinned_ones() {
    let test = "unused_images_are_collected_oldest_first_keeping_used_and_pinned_ones";
    if CriFixture::required(test).is_none() {
        return;
    }
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("image-gc").await;
    let pause = fixture
        .client
        .image_status(oci_image::PAUSE_IMAGE.to_owned())
        .await
        .expect("ImageStatus")
        .expect("the pause image");
    let node = CriNode::start_with(&cluster.kubeconfig, &fixture, "image-gc", |_| {
        GC_SETTINGS.to_owned()
    })
    .await;
    let pod_name = format!("{}-user", node.name);
    node.guard(async {
        // A pod of busybox runs well within the minimum age, so its image is in use before it
        // could go.
        create_pod(
            &cluster,
            &node.name,
            &pod_name,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &pod_name).await;
        // One image detected before the other: the older goes first.
        for tag in [OLDER, NEWER] {
            fixture
                .containerd
                .import_archive(&oci_image::distinct_images_archive(&[tag]));
            eventually_async(&format!("the collector detects {tag}"), || async {
                let state = gc_state(&node).await;
                has_image(&state, tag)
                    || state["removed"]
                        .as_array()
                        .is_some_and(|removed| removed.iter().any(|image| image["name"] == tag))
            })
            .await;
        }
        eventually_async("both unused images are removed", || async {
            let state = gc_state(&node).await;
            [OLDER, NEWER].iter().all(|tag| {
                state["removed"]
                    .as_array()
                    .is_some_and(|removed| removed.iter().any(|image| image["name"] == *tag))
            })
        })
        .await;
        let state = gc_state(&node).await;
        let removed: Vec<&str> = state["removed"]
            .as_array()
            .expect("removed")
            .iter()
            .filter_map(|image| image["name"].as_str())
            .collect();
        let position = |tag| removed.iter().position(|name| *name == tag);
        assert!(
            position(OLDER) < position(NEWER),
            "the older first: {state:#}"
        );
        assert_eq!(position(oci_image::BUSYBOX_IMAGE), None, "{state:#}");
        for tag in [OLDER, NEWER] {
            let status = fixture
                .client
                .image_status(tag.to_owned())
                .await
                .expect("ImageStatus");
            assert!(status.is_none(), "{tag} is gone from the runtime");
        }
        let busybox = fixture
            .client
            .image_status(oci_image::BUSYBOX_IMAGE.to_owned())
            .await
            .expect("ImageStatus");
        assert!(busybox.is_some(), "the image in use stays: {state:#}");
        if pause.pinned {
            let kept = fixture
                .client
                .image_status(oci_image::PAUSE_IMAGE.to_owned())
                .await
                .expect("ImageStatus");
            assert!(kept.is_some(), "the pinned sandbox image stays: {state:#}");
        }

        eventually_async(
            "FreeDiskSpaceFailed and ImageGCFailed are on the Node",
            || async {
                let free = objects::events_about(&cluster, &node.name, "FreeDiskSpaceFailed").await;
                let failed = objects::events_about(&cluster, &node.name, "ImageGCFailed").await;
                let text = "Insufficient free disk space on the node's image filesystem (";
                free.iter().any(|event| {
                    event.type_.as_deref() == Some("Warning")
                        && event
                            .message
                            .as_deref()
                            .is_some_and(|m| m.starts_with(text))
                }) && failed.iter().any(|event| {
                    event
                        .message
                        .as_deref()
                        .is_some_and(|m| m.starts_with(text))
                })
            },
        )
        .await;
        Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
            .delete(&pod_name, &DeleteParams::default())
            .await
            .expect("the pod is deleted");
    })
    .await;
}
