//! The kubelet's pod rules as the CRI provider applies them, against the in-memory runtime on
//! paused time: admission against the shared Node, the environment from ConfigMaps read
//! through the API port (and its CreateContainerConfigError), `imagePullSecrets` as the pull's
//! credentials, and the Events each step records.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::tests::{Harness, IMAGE, app, phase, pod, waiting_reason};
use nodepulse_actors::{
    node_status::NodeView,
    volume_manager::{VolumeSourceApi, ports::fakes::objects::FakeObjects},
};

fn node_with_one_cpu() -> Arc<NodeView> {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-1", "labels": {"kubernetes.io/os": "linux"}},
        "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}},
    }))
    .unwrap();
    let view = Arc::new(NodeView::default());
    view.set(Some(&node));
    view
}

fn requesting_cpu(name: &str, uid: &str, cpu: &str) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
                               "resources": {"requests": {"cpu": cpu}}}]}),
    );
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.uid = Some(uid.to_owned());
    pod
}

#[tokio::test(start_paused = true)]
async fn a_pod_over_the_cpu_left_by_admitted_pods_ends_failed_out_of_cpu_and_never_runs() {
    let view = node_with_one_cpu();
    let mut harness = Harness::configured(|pods| pods.with_node_view(view));
    harness.apply(&requesting_cpu("first", "u1", "600m"));
    harness
        .status_where("the first pod runs", |s| phase(s) == "Running")
        .await;
    harness.apply(&requesting_cpu("second", "u2", "600m"));
    let status = harness
        .status_where("the second pod is rejected", |s| phase(s) == "Failed")
        .await;
    assert_eq!(status["reason"], "OutOfcpu");
    let message =
        "Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000";
    assert_eq!(status["message"], format!("Pod was rejected: {message}"));
    assert!(
        harness
            .events()
            .contains(&format!("Warning OutOfcpu: {message}")),
        "{:?}",
        harness.events()
    );
    assert_eq!(harness.terminated(), 1, "the rejected pod is terminated");
    assert_eq!(
        harness.runtime.count("RunPodSandbox"),
        1,
        "only the admitted pod got a sandbox"
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_config_map_key_is_create_container_config_error_until_the_key_appears() {
    let objects = FakeObjects::default();
    objects.set_config_map("settings", &[("other", "x")]);
    let api = Arc::new(objects.clone()) as Arc<dyn VolumeSourceApi>;
    let mut harness = Harness::configured(|pods| pods.with_objects(api));
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "command": ["sh", "-c"], "args": ["echo $(GREETING) from $(POD_NAME)"],
            "env": [
                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ]}]}),
    ));
    let status = harness
        .status_where("CreateContainerConfigError", |s| {
            waiting_reason(s) == "CreateContainerConfigError"
        })
        .await;
    let message = "couldn't find key greeting in ConfigMap default/settings";
    assert_eq!(app(&status)["state"]["waiting"]["message"], message);
    assert!(
        harness
            .events()
            .contains(&format!("Warning Failed: Error: {message}")),
        "{:?}",
        harness.events()
    );
    assert_eq!(harness.runtime.count("CreateContainer"), 0);
    objects.set_config_map("settings", &[("greeting", "hello")]);
    harness
        .status_where("Running once the key exists", |s| phase(s) == "Running")
        .await;
    let created = harness.runtime.created("app");
    let config = created.last().expect("the container was created");
    assert!(
        config
            .envs
            .contains(&("GREETING".to_owned(), "hello".to_owned()))
    );
    assert!(
        config
            .envs
            .contains(&("POD_NAME".to_owned(), "web".to_owned()))
    );
    assert_eq!(config.args, ["echo hello from web"]);
}

#[tokio::test(start_paused = true)]
async fn a_started_container_records_pulled_created_and_started_in_order() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert_eq!(
        harness.events(),
        [
            format!(
                "Normal Pulled: Container image \"{IMAGE}\" already present on machine and can be accessed by the pod"
            ),
            "Normal Created: Container created".to_owned(),
            "Normal Started: Container started".to_owned(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_image_under_never_records_err_image_never_pull_events() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": "nodepulse.test/missing:1", "imagePullPolicy": "Never"}]}),
    ));
    harness
        .status_where("ErrImageNeverPull", |s| {
            waiting_reason(s) == "ErrImageNeverPull"
        })
        .await;
    let events = harness.events();
    assert_eq!(
        events[..2],
        [
            "Warning ErrImageNeverPull: Container image \"nodepulse.test/missing:1\" is not present with pull policy of Never".to_owned(),
            "Warning Failed: Error: ErrImageNeverPull".to_owned(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_image_pull_secret_for_the_registry_is_the_pulls_credential() {
    let objects = FakeObjects::default();
    let config = json!({"auths": {"example.test": {"username": "robot", "password": "s3cret"}}});
    let secret = serde_json::from_value(json!({
        "metadata": {"name": "regcred", "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            config.to_string(),
        )},
    }))
    .unwrap();
    objects.set_secret("regcred", secret);
    let api = Arc::new(objects) as Arc<dyn VolumeSourceApi>;
    let mut harness = Harness::configured(|pods| pods.with_objects(api));
    harness.apply(&pod(
        "Always",
        json!({"imagePullSecrets": [{"name": "regcred"}, {"name": "missing"}],
               "containers": [{"name": "app", "image": "example.test/app:1"}]}),
    ));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let pulls: Vec<String> = harness
        .runtime
        .calls()
        .into_iter()
        .filter(|call| call.starts_with("PullImage"))
        .collect();
    assert_eq!(pulls, ["PullImage example.test/app:1 as robot"]);
    assert!(
        harness.events().iter().any(|e| e
            .starts_with("Normal Pulled: Successfully pulled image \"example.test/app:1\" in ")),
        "{:?}",
        harness.events()
    );
}
