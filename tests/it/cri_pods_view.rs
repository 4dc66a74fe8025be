//! The node's handle as a service outside the actors reads it (the kubelet API's logs and exec
//! will): a pod running on containerd appears in the `PodsView` with the sandbox and container
//! IDs the runtime holds and the log file the runtime writes, and the handle's CRI client
//! reaches the same runtime; once the pod is deleted it leaves the view.

use std::{sync::Arc, time::Duration};

use kube::{Api, api::DeleteParams};
use nodepulse_actors::ports::{ContainerFilter, ContainerRuntime, ContainerState, SandboxFilter};
use nodepulse_testkit::{eventually, pods::wait_running};

use super::cri_pods::{NAMESPACE, Setup, app, create_pod, runtime_id, shell, spec};

#[actix_rt::test]
async fn a_running_pod_is_in_the_handles_pods_view_with_its_ids_and_log_file() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "a_running_pod_is_in_the_handles_pods_view_with_its_ids_and_log_file",
        "cri-view",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-logs", node.name);
        let script =
            "echo from-the-view; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        let pod = wait_running(&cluster.client, NAMESPACE, &name).await;
        let uid = pod.metadata.uid.clone().expect("a uid");
        let container_id = runtime_id(&app(&pod));
        let views = &node.handle.views;

        eventually("the view shows the running container", || {
            views
                .pods
                .snapshot()
                .container(NAMESPACE, &name, "app")
                .is_some_and(|c| c.id == container_id && c.state == ContainerState::Running)
        })
        .await;
        let snapshot = views.pods.snapshot();
        let record = snapshot.by_name(NAMESPACE, &name).expect("the pod");
        assert_eq!(record.uid, uid);
        assert!(Arc::ptr_eq(
            record,
            snapshot.by_uid(&uid).expect("by its UID")
        ));
        let container = record.container("app").expect("its container");
        assert_eq!(container.restart_count, 0);
        assert!(
            container.image_ref.starts_with("sha256:"),
            "{}",
            container.image_ref
        );
        assert!(container.started_at.is_some());

        let runtime = node
            .handle
            .runtime
            .clone()
            .expect("a CRI node has a CRI client");
        let sandboxes = runtime
            .list_pod_sandboxes(SandboxFilter {
                labels: [("io.kubernetes.pod.uid".to_owned(), uid.clone())].into(),
                ..SandboxFilter::default()
            })
            .await
            .expect("ListPodSandbox through the handle's client");
        assert_eq!(
            record.sandbox_id(),
            sandboxes.first().map(|sandbox| sandbox.id.as_str()),
            "the sandbox the runtime holds"
        );
        let containers = runtime
            .list_containers(ContainerFilter {
                id: Some(container.id.clone()),
                ..ContainerFilter::default()
            })
            .await
            .expect("ListContainers through the handle's client");
        assert_eq!(
            containers.len(),
            1,
            "the view's container ID is the runtime's"
        );

        let log_path = container.log_path.clone();
        eventually("the container's output is in its log file", || {
            std::fs::read_to_string(&log_path).is_ok_and(|log| log.contains("from-the-view"))
        })
        .await;

        let pods =
            Api::<k8s_openapi::api::core::v1::Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let delete = DeleteParams {
            grace_period_seconds: Some(1),
            ..DeleteParams::default()
        };
        pods.delete(&name, &delete).await.expect("delete accepted");
        tokio::time::timeout(Duration::from_secs(60), async {
            while views.pods.snapshot().by_uid(&uid).is_some() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the deleted pod leaves the view");
    })
    .await;
}
