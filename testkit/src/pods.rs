//! A whole simulated node (all its actors, `runtime: simulated`) against a test cluster, and
//! the pod helpers the pod tests share: create pods bound to it, read their conditions, wait
//! for a phase.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use nodepulse::node::NodeActors;
use nodepulse_supervisor::SupervisorHandle;
use serde_json::{Value, json};

use crate::cleanup::{Owned, RUN_LABEL, own, run_id};
use crate::eventually_async;

/// The configuration of a simulated node in the pod tests: quick restarts, a fixed pod CIDR.
pub const SIMULATED_NODE: &str = "runtime: simulated
podCIDR: 10.123.0.0/16
supervision:
  livenessTimeout: 1s
  livenessInterval: 100ms
  backoff:
    initial: 50ms
";

/// A simulated fleet's configuration: its own pod range, thresholds no test host meets, and a
/// shared rate limit that registers a thousand nodes in seconds.
pub const SIMULATED_FLEET: &str = "runtime: simulated
podCIDR: 10.124.0.0/16
evictionHard:
  memory.available: 1Mi
kubeAPIQPS: 200
kubeAPIBurst: 400
";

/// Thresholds no test host meets, unless a test asks for pressure: the host running the
/// tests may well be short of disk, and a node under pressure rightly evicts the test's pods.
const NO_PRESSURE: &str = "evictionHard:\n  memory.available: 1Mi\n";

/// Starts every actor of node `name` with `yaml` (after [`SIMULATED_NODE`]'s settings, and
/// thresholds that are never met unless `yaml` sets `evictionHard`).
pub async fn start_simulated_node(kubeconfig: &Path, name: &str, yaml: &str) -> SupervisorHandle {
    let thresholds = if yaml.contains("evictionHard") {
        ""
    } else {
        NO_PRESSURE
    };
    let (settings, api) = crate::node::connect(
        kubeconfig,
        name,
        &format!("{SIMULATED_NODE}{thresholds}{yaml}"),
    )
    .await;
    NodeActors::new(&settings)
        .api(api)
        .start()
        .expect("a whole node is wired")
        .supervisor
}

/// A pod bound to `node` from `extra` merged over a one-container pod named `name`.
pub fn pod_manifest(name: &str, namespace: &str, node: &str, extra: Value) -> Pod {
    let mut manifest = json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {"nodepulse.test/owner": "tests", RUN_LABEL: run_id()}},
        "spec": {"nodeName": node, "restartPolicy": "Always",
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    });
    merge(&mut manifest, extra);
    serde_json::from_value(manifest).expect("a pod")
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

pub async fn create(client: &kube::Client, pod: &Pod) -> Pod {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    own(Owned::Pod {
        namespace: namespace.to_owned(),
        name: pod.metadata.name.clone().unwrap_or_default(),
    });
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), pod)
        .await
        .expect("the pod is created")
}

/// The status of condition `kind`, if the pod has it.
pub fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

pub fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Waits until `check` holds for the pod as the API has it; returns the pod then.
pub async fn wait_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    eventually_async(&format!("{namespace}/{name}: {what}"), || async {
        pods.get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|pod| check(&pod))
    })
    .await;
    pods.get(name).await.expect("the pod")
}

/// Waits until pod `name` in `namespace` is Running and Ready; the pod then.
pub async fn wait_running(client: &kube::Client, namespace: &str, name: &str) -> Pod {
    wait_pod(
        client,
        namespace,
        name,
        "Running and Ready",
        running_and_ready,
    )
    .await
}

/// Running with every container ready.
pub fn running_and_ready(pod: &Pod) -> bool {
    phase(pod) == Some("Running") && condition(pod, "Ready").as_deref() == Some("True")
}
