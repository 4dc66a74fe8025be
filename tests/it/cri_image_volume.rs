//! An image volume (`volumes[].image`) on a real `runtime: cri` node, against an API server (the
//! emulator, or a real cluster): nodepulse makes the volume's image present and hands
//! containerd a CRI mount naming it. A containerd that mounts images (2.1 and later) runs the
//! container with the image's files at the mount path; containerd 1.6 (Debian 12's, this
//! machine's) reads neither image field, refuses CreateContainer for the mount's empty host
//! path, and the container waits in `CreateContainerError` with containerd's words, as under
//! the kubelet. Either way the container never runs without its volume.

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::ports::{ContainerFilter, ContainerRuntime};
use serde_json::json;

use crate::cri_pods::{NAMESPACE, Setup, app, create_pod, shell, spec};
use nodepulse_testkit::{
    objects::wait_pod_event,
    oci_image::BUSYBOX_IMAGE,
    pods::{phase, wait_pod},
};

/// Succeeds only where the image's busybox is at `/volume`, and says so.
const SEES_THE_IMAGE: &str = "test -x /volume/bin/busybox && echo mounted > /dev/termination-log";

fn create_container_error(pod: &Pod) -> Option<String> {
    let waiting = app(pod).state?.waiting?;
    if waiting.reason.as_deref() == Some("CreateContainerError") {
        waiting.message
    } else {
        None
    }
}

#[actix_rt::test]
async fn an_image_volume_is_mounted_from_its_image_or_the_container_never_runs() {
    let Some(setup) = Setup::start(
        "an_image_volume_is_mounted_from_its_image_or_the_container_never_runs",
        "cri-image-volume",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-image-volume", node.name);
        let mut container = shell("app", SEES_THE_IMAGE);
        container["volumeMounts"] = json!([{"name": "busybox", "mountPath": "/volume"}]);
        let mut manifest = spec("Never", json!([container]));
        manifest["spec"]["volumes"] = json!([{"name": "busybox",
            "image": {"reference": BUSYBOX_IMAGE, "pullPolicy": "IfNotPresent"}}]);
        create_pod(cluster, &node.name, &name, manifest).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "mounted, or refused",
            |pod| {
                phase(pod) == Some("Succeeded")
                    || phase(pod) == Some("Failed")
                    || create_container_error(pod).is_some()
            },
        )
        .await;
        if let Some(message) = create_container_error(&pod) {
            // containerd 1.6: the mount's host path is empty, and cannot be made.
            assert!(
                message.contains(r#"failed to mkdir "": mkdir : no such file or directory"#),
                "{message}"
            );
            wait_pod_event(cluster, &pod, "Warning", "Failed", |event| {
                event == format!("Error: {message}")
            })
            .await;
            let uid = pod.metadata.uid.clone().expect("a uid");
            let containers = setup
                .fixture
                .client
                .list_containers(ContainerFilter {
                    labels: [("io.kubernetes.pod.uid".to_owned(), uid)].into(),
                    ..ContainerFilter::default()
                })
                .await
                .expect("ListContainers");
            assert!(containers.is_empty(), "nothing was created: {containers:?}");
            assert_eq!(phase(&pod), Some("Pending"));
        } else {
            let terminated = app(&pod).state.and_then(|s| s.terminated);
            let message = terminated.and_then(|t| t.message).unwrap_or_default();
            assert_eq!(message.trim(), "mounted", "{:?}", pod.status);
        }
    })
    .await;
}
