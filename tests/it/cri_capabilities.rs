//! What the runtime can do, on a real `runtime: cri` node (containerd 1.6.20 here), against an
//! API server (the emulator, or a real cluster): the Node reports the handlers and features
//! the runtime's CRI `Status` lists (containerd 1.6 lists none, so neither field is written);
//! a `hostUsers: false` pod is refused with the kubelet's `FailedCreatePodSandBox` message
//! and never gets a sandbox or an ID block; a `recursiveReadOnly: Enabled` mount is refused
//! with the kubelet's CreateContainerConfigError message.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodepulse_actors::ports::{ContainerRuntime, RuntimeService, SandboxFilter};
use serde_json::json;

use crate::cri_pods::{NAMESPACE, Setup, UNTIL_TERM, shell, spec};
use nodepulse_testkit::{
    objects::wait_pod_event,
    pods::{create, pod_manifest, wait_pod},
};

const USERNS_REFUSED: &str = "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces";

#[actix_rt::test]
async fn without_a_handler_that_can_a_host_users_false_pod_and_a_recursive_read_only_mount_are_refused()
 {
    let Some(setup) = Setup::start(
        "without_a_handler_that_can_a_host_users_false_pod_and_a_recursive_read_only_mount_are_refused",
        "cri-caps",
    )
    .await
    else {
        return;
    };
    let (node, cluster, fixture) = (&setup.node, &setup.cluster, &setup.fixture);
    node.guard(async {
        let reported = fixture.client.status().await.expect("CRI Status");
        // The refusals below are what a runtime without a user-namespace handler gets.
        assert!(
            !reported.handlers.iter().any(|h| h.name.is_empty() && h.supports_user_namespaces),
            "this runtime can run user namespaces: {:?}",
            reported.handlers
        );

        let name = format!("{}-userns", node.name);
        let mut manifest = pod_manifest(
            &name,
            NAMESPACE,
            &node.name,
            spec("Never", json!([shell("app", UNTIL_TERM)])),
        );
        if let Some(spec) = manifest.spec.as_mut() {
            spec.host_users = Some(false);
        }
        let pod = create(&cluster.client, &manifest).await;
        wait_pod_event(cluster, &pod, "Warning", "FailedCreatePodSandBox", |m| {
            m == USERNS_REFUSED
        })
        .await;
        let uid = pod.metadata.uid.clone().expect("a uid");
        let sandboxes = fixture
            .client
            .list_pod_sandboxes(SandboxFilter {
                labels: [("io.kubernetes.pod.uid".to_owned(), uid.clone())].into(),
                ..SandboxFilter::default()
            })
            .await
            .expect("ListPodSandbox");
        assert!(sandboxes.is_empty(), "no sandbox: {sandboxes:?}");
        assert!(
            !node.root_dir().join("pods").join(&uid).join("userns").exists(),
            "no ID block recorded"
        );

        let name = format!("{}-rro", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["volumeMounts"] = json!([{"name": "data", "mountPath": "/data",
            "readOnly": true, "recursiveReadOnly": "Enabled"}]);
        let mut extra = spec("Never", json!([container]));
        extra["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
        create(
            &cluster.client,
            &pod_manifest(&name, NAMESPACE, &node.name, extra),
        )
        .await;
        let refused = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "CreateContainerConfigError",
            |pod| {
                crate::cri_pods::app(pod)
                    .state
                    .and_then(|state| state.waiting)
                    .is_some_and(|waiting| {
                        waiting.reason.as_deref() == Some("CreateContainerConfigError")
                    })
            },
        )
        .await;
        let waiting = crate::cri_pods::app(&refused).state.and_then(|s| s.waiting);
        assert_eq!(
            waiting.and_then(|w| w.message).as_deref(),
            Some("failed to resolve recursive read-only mode: volume \"data\" requested recursive read-only mode, but it is not supported by the runtime")
        );

        // The Node says what the runtime said: no handlers and no features from containerd 1.6.
        let node_object = Api::<Node>::all(cluster.client.clone())
            .get(&node.name)
            .await
            .expect("the Node");
        let status = node_object.status.unwrap_or_default();
        assert_eq!(
            status.runtime_handlers.unwrap_or_default().len(),
            reported.handlers.len()
        );
        assert_eq!(
            status.features.and_then(|f| f.supplemental_groups_policy),
            reported.features.map(|f| f.supplemental_groups_policy)
        );
    })
    .await;
}
