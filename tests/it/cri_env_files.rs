//! `env[].valueFrom.fileKeyRef` (EnvFiles) on a real `runtime: cri` node (containerd), as the
//! upstream `FileKeyRef` specs check it: an init container writes `KEY='value'` lines into an
//! emptyDir, and the next containers (an init container too) start with those values, an
//! optional missing key left unset; a required key the file lacks keeps the container in
//! `CreateContainerConfigError` with the kubelet's text and Warning until the key is there;
//! the API server refuses a reference to a volume that is missing or not an emptyDir.

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use serde_json::{Value, json};

use crate::cri_pods::{NAMESPACE, Setup, app, create_pod, shell, wait_phase};
use nodepulse_testkit::{
    objects::wait_pod_event,
    pods::{pod_manifest, wait_pod},
};

/// An init container that writes `lines` to `/data/config.env` in the `config` volume.
fn writer(lines: &str) -> Value {
    let script = format!("printf \"{lines}\" > /data/config.env");
    let mut container = shell("setup-envfile", &script);
    container["volumeMounts"] = json!([{"name": "config", "mountPath": "/data"}]);
    container
}

fn file_key(name: &str, key: &str, optional: Option<bool>) -> Value {
    json!({"name": name, "valueFrom": {"fileKeyRef":
        {"volumeName": "config", "path": "config.env", "key": key, "optional": optional}}})
}

/// A container that writes its `CONFIG*` variables, sorted, where its status shows them.
fn reader(name: &str, env: Value) -> Value {
    let mut container = shell(name, "env | grep CONFIG | sort > /dev/termination-log");
    container["env"] = env;
    container
}

fn pod_spec(init: Value, containers: Value) -> Value {
    json!({"spec": {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "config", "emptyDir": {}}],
        "initContainers": init,
        "containers": containers,
    }})
}

fn terminated_message(pod: &Pod, init: bool) -> String {
    let status = pod.status.as_ref().expect("a status");
    let statuses = match init {
        true => status.init_container_statuses.as_ref(),
        false => status.container_statuses.as_ref(),
    };
    let last = statuses
        .and_then(|all| all.last())
        .expect("a container status");
    let terminated = last.state.as_ref().and_then(|s| s.terminated.as_ref());
    terminated
        .and_then(|t| t.message.clone())
        .unwrap_or_default()
}

#[actix_rt::test]
async fn containers_start_with_the_keys_an_init_container_wrote_to_an_empty_dir() {
    let test = "containers_start_with_the_keys_an_init_container_wrote_to_an_empty_dir";
    let Some(setup) = Setup::start(test, "cri-envfiles").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-reads", node.name);
        let lines = "# written by setup\\n  CONFIG_1='value 1'\\nCONFIG_2='two' # a note\\n";
        let init = json!([
            writer(lines),
            reader(
                "init-reader",
                json!([file_key("CONFIG_INIT", "CONFIG_1", Some(false))])
            ),
        ]);
        let main = reader(
            "use-envfile",
            json!([
                file_key("CONFIG_1", "CONFIG_1", None),
                file_key("CONFIG_2", "CONFIG_2", None),
                file_key("CONFIG_MISSING", "CONFIG_3", Some(true)),
                {"name": "CONFIG_EXPANDED", "value": "[$(CONFIG_1)]"},
            ]),
        );
        create_pod(cluster, &node.name, &name, pod_spec(init, json!([main]))).await;
        let pod = wait_phase(cluster, &name, "Succeeded").await;
        assert_eq!(terminated_message(&pod, true), "CONFIG_INIT=value 1\n");
        assert_eq!(
            terminated_message(&pod, false),
            "CONFIG_1=value 1\nCONFIG_2=two\nCONFIG_EXPANDED=[value 1]\n",
            "no CONFIG_MISSING"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_required_key_the_file_lacks_is_a_create_container_config_error_until_it_is_there() {
    let test = "a_required_key_the_file_lacks_is_a_create_container_config_error_until_it_is_there";
    let Some(setup) = Setup::start(test, "cri-envfiles-missing").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-missing", node.name);
        let mut main = shell(
            "use-envfile",
            "echo \"$MISSING_KEY\" > /dev/termination-log",
        );
        main["env"] = json!([file_key("MISSING_KEY", "MISSING_KEY", None)]);
        main["volumeMounts"] = json!([{"name": "config", "mountPath": "/data"}]);
        let spec = pod_spec(json!([writer("EXISTING_KEY='value'\\n")]), json!([main]));
        let created = create_pod(cluster, &node.name, &name, spec).await;
        let uid = created.metadata.uid.clone().expect("a UID");
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "CreateContainerConfigError",
            |pod| {
                app(pod)
                    .state
                    .and_then(|s| s.waiting)
                    .and_then(|w| w.reason)
                    .as_deref()
                    == Some("CreateContainerConfigError")
            },
        )
        .await;
        let file = node
            .root_dir()
            .join("pods")
            .join(&uid)
            .join("volumes/kubernetes.io~empty-dir/config/config.env");
        let expected = format!(
            "environment variable key \"MISSING_KEY\" not found in file {:?}",
            file.display().to_string()
        );
        let waiting = app(&pod).state.and_then(|s| s.waiting).expect("waiting");
        assert_eq!(waiting.message.as_deref(), Some(expected.as_str()));
        wait_pod_event(cluster, &pod, "Warning", "Failed", |message| {
            message == format!("Error: {expected}")
        })
        .await;

        // The key written into the volume (as another container could): the next try starts.
        std::fs::write(&file, "MISSING_KEY='found'\n").expect("the node's volume is writable");
        let pod = wait_phase(cluster, &name, "Succeeded").await;
        assert_eq!(terminated_message(&pod, false), "found\n");
    })
    .await;
}

#[actix_rt::test]
async fn a_file_key_ref_to_a_missing_or_non_empty_dir_volume_is_refused_at_creation() {
    let cluster = nodepulse_testkit::cluster::TestCluster::start().await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    let main = reader(
        "use-envfile",
        json!([file_key("CONFIG_1", "CONFIG_1", None)]),
    );
    for (suffix, volume, message) in [
        (
            "missing",
            json!({"name": "other", "emptyDir": {}}),
            "spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Not found: \"config\"",
        ),
        (
            "hostpath",
            json!({"name": "config", "hostPath": {"path": "/tmp"}}),
            "spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Invalid value: \"config\": referenced volume must be of type emptyDir",
        ),
    ] {
        let mut spec = pod_spec(json!([writer("CONFIG_1='x'\\n")]), json!([main.clone()]));
        spec["spec"]["initContainers"][0]["volumeMounts"] = json!([]);
        spec["spec"]["volumes"] = json!([volume]);
        let name = format!("filekeyref-refused-{suffix}");
        let manifest = pod_manifest(&name, NAMESPACE, "no-such-node", spec);
        let created = pods.create(&PostParams::default(), &manifest).await;
        let Err(error) = created else {
            let _ = pods.delete(&name, &Default::default()).await;
            panic!("the API server took {name}");
        };
        let kube::Error::Api(status) = error else {
            panic!("not an API error: {error}");
        };
        assert_eq!(status.code, 422, "{}", status.message);
        assert!(status.message.contains(message), "{}", status.message);
    }
}
