//! The kubelet's pod rules on a real `runtime: cri` node (containerd), against an API server
//! (the emulator, or a real cluster): an env var from a ConfigMap (and `$(VAR)` in the
//! command) reaches the container, whose start is recorded as Pulled, Created and Started
//! Events; a pod requesting more CPU than the Node has ends Failed with OutOfcpu and never
//! reaches the runtime; a pod's configMap and emptyDir volumes are mounted in its container, and
//! so is the service-account volume every pod is given, read-only.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use nodepulse_actors::ports::ContainerRuntime;
use serde_json::json;

use crate::cri_pods::{Setup, UNTIL_TERM, app, runtime_containers, runtime_id, shell, spec};
use nodepulse_testkit::{
    objects::{create_config_map, wait_pod_event},
    pods::{create, phase, pod_manifest, running_and_ready, wait_pod},
};

const NAMESPACE: &str = "default";

/// What `cat <path>` prints inside the pod's app container.
async fn read_in_container(setup: &Setup, pod: &Pod, path: &str) -> String {
    let output = setup
        .fixture
        .client
        .exec_sync(
            runtime_id(&app(pod)),
            vec!["cat".into(), path.into()],
            Duration::from_secs(10),
        )
        .await
        .expect("ExecSync");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Creates pod `name` on the node with `extra` merged in, and waits until it runs and is ready.
async fn run_pod(setup: &Setup, name: &str, extra: serde_json::Value) -> Pod {
    let client = &setup.cluster.client;
    create(
        client,
        &pod_manifest(name, NAMESPACE, &setup.node.name, extra),
    )
    .await;
    wait_pod(
        client,
        NAMESPACE,
        name,
        "Running and Ready",
        running_and_ready,
    )
    .await
}

#[actix_rt::test]
async fn an_env_var_from_a_config_map_reaches_the_container_and_its_start_is_recorded() {
    let Some(setup) = Setup::start(
        "an_env_var_from_a_config_map_reaches_the_container_and_its_start_is_recorded",
        "cri-env",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-env", node.name);
        create_config_map(
            cluster,
            NAMESPACE,
            &name,
            json!({"data": {"greeting": "hello"}}),
        )
        .await;
        // `$(GREETING)` is the kubelet's expansion; `$GREETING` the shell's.
        let script = format!("echo $GREETING $(GREETING) > /tmp/out; {UNTIL_TERM}");
        let mut container = shell("app", &script);
        container["env"] = json!([{"name": "GREETING",
            "valueFrom": {"configMapKeyRef": {"name": name, "key": "greeting"}}}]);
        let pod = run_pod(&setup, &name, spec("Always", json!([container]))).await;
        assert_eq!(
            read_in_container(&setup, &pod, "/tmp/out").await,
            "hello hello\n"
        );
        wait_pod_event(cluster, &pod, "Normal", "Pulled", |m| {
            m.ends_with("already present on machine and can be accessed by the pod")
        })
        .await;
        wait_pod_event(cluster, &pod, "Normal", "Created", |m| {
            m == "Container created"
        })
        .await;
        wait_pod_event(cluster, &pod, "Normal", "Started", |m| {
            m == "Container started"
        })
        .await;
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_requesting_more_cpu_than_the_node_has_ends_failed_out_of_cpu() {
    let Some(setup) = Setup::start(
        "a_pod_requesting_more_cpu_than_the_node_has_ends_failed_out_of_cpu",
        "cri-admit",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-big", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["resources"] = json!({"requests": {"cpu": "1000"}});
        let manifest = pod_manifest(
            &name,
            NAMESPACE,
            &node.name,
            spec("Always", json!([container])),
        );
        create(&cluster.client, &manifest).await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "Failed", |pod| {
            phase(pod) == Some("Failed")
        })
        .await;
        let status = pod.status.clone().expect("a status");
        assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
        let message = status.message.unwrap_or_default();
        assert!(
            message.starts_with(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000,"
            ),
            "{message}"
        );
        wait_pod_event(cluster, &pod, "Warning", "OutOfcpu", |m| {
            m.starts_with("Node didn't have enough resource: cpu")
        })
        .await;
        assert!(
            runtime_containers(&setup.fixture, &pod).await.is_empty(),
            "a rejected pod starts nothing"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_pods_config_map_and_empty_dir_volumes_are_mounted_in_its_container() {
    let Some(setup) = Setup::start(
        "a_pods_config_map_and_empty_dir_volumes_are_mounted_in_its_container",
        "cri-vol",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-vol", node.name);
        create_config_map(
            cluster,
            NAMESPACE,
            &name,
            json!({"data": {"greeting": "hi"}}),
        )
        .await;
        // A configMap is read-only in the container even where the mount asks for writing,
        // as the kubelet's: a writer there could swap the atomic writer's `..data` for a link.
        let script = format!(
            "echo scratch > /scratch/file; \
             if touch /cfg-rw/x 2>/dev/null; then echo writable; else echo read-only; fi > /scratch/cfg; \
             {UNTIL_TERM}"
        );
        let mut container = shell("app", &script);
        container["volumeMounts"] = json!([
            {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true},
            {"name": "cfg", "mountPath": "/cfg-rw", "readOnly": false},
            {"name": "scratch", "mountPath": "/scratch"},
        ]);
        let mut extra = spec("Always", json!([container]));
        extra["spec"]["volumes"] = json!([
            {"name": "cfg", "configMap": {"name": name}},
            {"name": "scratch", "emptyDir": {}},
        ]);
        let pod = run_pod(&setup, &name, extra).await;
        assert_eq!(
            read_in_container(&setup, &pod, "/etc/cfg/greeting").await,
            "hi"
        );
        nodepulse_testkit::eventually_async("the container wrote to its emptyDir", || async {
            read_in_container(&setup, &pod, "/scratch/file").await == "scratch\n"
        })
        .await;
        nodepulse_testkit::eventually_async("the container tried its configMap", || async {
            !read_in_container(&setup, &pod, "/scratch/cfg").await.is_empty()
        })
        .await;
        assert_eq!(
            read_in_container(&setup, &pod, "/scratch/cfg").await,
            "read-only\n"
        );
    })
    .await;
}

/// The volume every real pod is given (ServiceAccount admission) reaches its container where
/// client libraries look for it, read-only: the namespace, the cluster CA of the namespace's
/// `kube-root-ca.crt` and a token.
#[actix_rt::test]
async fn the_service_account_volume_is_mounted_read_only_where_clients_look_for_it() {
    const DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let Some(setup) = Setup::start(
        "the_service_account_volume_is_mounted_read_only_where_clients_look_for_it",
        "cri-sa",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-sa", node.name);
        let pod = run_pod(
            &setup,
            &name,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        assert_eq!(
            read_in_container(&setup, &pod, &format!("{DIR}/namespace")).await,
            NAMESPACE
        );
        let root_ca = kube::Api::<ConfigMap>::namespaced(cluster.client.clone(), NAMESPACE)
            .get("kube-root-ca.crt")
            .await
            .expect("the namespace's root CA ConfigMap");
        let ca = root_ca.data.as_ref().and_then(|data| data.get("ca.crt"));
        assert_eq!(
            Some(&read_in_container(&setup, &pod, &format!("{DIR}/ca.crt")).await),
            ca
        );
        let token = read_in_container(&setup, &pod, &format!("{DIR}/token")).await;
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        let write = setup
            .fixture
            .client
            .exec_sync(
                runtime_id(&app(&pod)),
                vec!["touch".into(), format!("{DIR}/written")],
                Duration::from_secs(10),
            )
            .await
            .expect("ExecSync");
        assert_ne!(write.exit_code, 0, "the mount is read-only");
    })
    .await;
}
