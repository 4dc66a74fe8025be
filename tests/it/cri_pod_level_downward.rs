//! The downward API of a pod with pod-level resources (`spec.resources`, PodLevelResources) on
//! a real `runtime: cri` node (containerd), as the upstream "Downward API tests for pod level
//! resources" check it: a container without limits of its own reads the pod's cpu and memory
//! limits through `resourceFieldRef` (cpu rounded up to whole cores), and the Node's
//! allocatable for what the pod does not limit.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodepulse_actors::quantity::value;
use serde_json::{Value, json};

use crate::cri_pods::{Setup, app, create_pod, shell, wait_phase};

fn limit(name: &str, resource: &str) -> Value {
    json!({"name": name, "valueFrom": {"resourceFieldRef": {"resource": resource}}})
}

/// A pod whose only container writes its `*_LIMIT` variables where its status shows them.
fn pod_spec(pod_resources: Value) -> Value {
    let mut container = shell(
        "dapi-container",
        "env | grep _LIMIT= | sort > /dev/termination-log",
    );
    container["env"] = json!([
        limit("CPU_LIMIT", "limits.cpu"),
        limit("MEMORY_LIMIT", "limits.memory")
    ]);
    json!({"spec": {
        "restartPolicy": "Never",
        "resources": pod_resources,
        "containers": [container],
    }})
}

#[actix_rt::test]
async fn a_container_without_limits_reads_the_pod_level_limits_then_the_nodes_allocatable() {
    let test = "a_container_without_limits_reads_the_pod_level_limits_then_the_nodes_allocatable";
    let Some(setup) = Setup::start(test, "cri-podlevel").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let requests = json!({"cpu": "250m", "memory": "32Mi"});
        let both = format!("{}-both", node.name);
        let spec =
            pod_spec(json!({"requests": requests, "limits": {"cpu": "1250m", "memory": "64Mi"}}));
        create_pod(cluster, &node.name, &both, spec).await;
        let cpu_only = format!("{}-cpu", node.name);
        let spec = pod_spec(json!({"requests": requests, "limits": {"cpu": "1250m"}}));
        create_pod(cluster, &node.name, &cpu_only, spec).await;

        let written = |pod: &k8s_openapi::api::core::v1::Pod| {
            app(pod)
                .state
                .and_then(|state| state.terminated)
                .and_then(|terminated| terminated.message)
                .unwrap_or_default()
        };
        let pod = wait_phase(cluster, &both, "Succeeded").await;
        assert_eq!(written(&pod), "CPU_LIMIT=2\nMEMORY_LIMIT=67108864\n");

        let pod = wait_phase(cluster, &cpu_only, "Succeeded").await;
        let nodes = Api::<Node>::all(cluster.client.clone());
        let reported = nodes.get(&node.name).await.expect("the Node");
        let allocatable = reported
            .status
            .and_then(|status| status.allocatable)
            .expect("an allocatable");
        let memory = value(&allocatable["memory"].0).expect("a quantity");
        assert_eq!(
            written(&pod),
            format!("CPU_LIMIT=2\nMEMORY_LIMIT={memory}\n")
        );
    })
    .await;
}
