//! Garbage collection on a real containerd: a running pod deleted from the API while the
//! daemon was SIGKILLed (force, grace 0: on a real cluster nothing else would remove it) is
//! stopped and removed by the restarted daemon — its containers, its sandbox, its CNI
//! address lease and its log directory — while a Succeeded pod still in the API keeps its
//! dead container and sandbox, as the kubelet's GC rules say.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::DeleteParams};
use nodepulse_actors::ports::{ContainerRuntime, SandboxFilter};
use nodepulse_testkit::{
    PATIENCE,
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::cri_node_config,
    daemon::DaemonProcess,
    eventually_async,
    pods::{create, phase, pod_manifest, running_and_ready, wait_pod},
};
use serde_json::json;

use crate::cri_pods::{UNTIL_TERM, runtime_containers, shell};

const NAMESPACE: &str = "default";
/// host-local's leases for the test network (`containerd.rs`): one file per address, naming
/// the sandbox that holds it.
const LEASES: &str = "/var/lib/cni/networks/nodepulse-test";

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().expect("a uid")
}

async fn runtime_sandboxes(fixture: &CriFixture, pod: &Pod) -> Vec<String> {
    let filter = SandboxFilter {
        labels: [("io.kubernetes.pod.uid".to_owned(), uid(pod))].into(),
        ..SandboxFilter::default()
    };
    let sandboxes = fixture
        .client
        .list_pod_sandboxes(filter)
        .await
        .expect("ListPodSandbox");
    sandboxes.into_iter().map(|s| s.id).collect()
}

/// Whether host-local's lease for `ip` names `sandbox`.
fn leased_to(ip: &str, sandbox: &str) -> bool {
    std::fs::read_to_string(Path::new(LEASES).join(ip))
        .is_ok_and(|lease| lease.lines().next() == Some(sandbox))
}

fn log_dir(dir: &Path, pod: &Pod) -> PathBuf {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    dir.join("logs")
        .join(format!("{NAMESPACE}_{name}_{}", uid(pod)))
}

#[actix_rt::test]
async fn a_pod_deleted_while_the_daemon_was_down_is_removed_from_the_runtime_at_restart() {
    let Some(()) = CriFixture::required(
        "a_pod_deleted_while_the_daemon_was_down_is_removed_from_the_runtime_at_restart",
    ) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-gc").await;
    let dir = nodepulse_testkit::root_dir::RootDir::new();
    let node = nodepulse_testkit::cluster::unique_node_name("cri-gc");
    let yaml = cri_node_config(&fixture, dir.path());
    let mut daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let doomed_name = format!("{node}-doomed");
    let done_name = format!("{node}-done");
    let doomed_spec = json!({"spec": {
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 2,
        "containers": [shell("app", UNTIL_TERM)],
    }});
    let done_spec =
        json!({"spec": {"restartPolicy": "Never", "containers": [shell("app", "exit 0")]}});
    create(
        &cluster.client,
        &pod_manifest(&doomed_name, NAMESPACE, &node, doomed_spec),
    )
    .await;
    create(
        &cluster.client,
        &pod_manifest(&done_name, NAMESPACE, &node, done_spec),
    )
    .await;
    let doomed = wait_pod(
        &cluster.client,
        NAMESPACE,
        &doomed_name,
        "Running and Ready",
        running_and_ready,
    )
    .await;
    let done = wait_pod(&cluster.client, NAMESPACE, &done_name, "Succeeded", |pod| {
        phase(pod) == Some("Succeeded")
    })
    .await;
    let ip = doomed
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a pod IP");
    let [sandbox] =
        <[String; 1]>::try_from(runtime_sandboxes(&fixture, &doomed).await).expect("one sandbox");
    assert!(
        leased_to(&ip, &sandbox),
        "host-local leased {ip} to the pod"
    );
    assert!(log_dir(dir.path(), &doomed).is_dir());
    let done_containers = runtime_containers(&fixture, &done).await;
    assert_eq!(
        done_containers.len(),
        1,
        "the Succeeded pod's dead container"
    );

    daemon.signal("KILL");
    assert!(
        daemon.wait_exit(PATIENCE).await.is_some(),
        "the daemon ended"
    );
    drop(daemon);
    Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
        .delete(&doomed_name, &DeleteParams::default().grace_period(0))
        .await
        .expect("force delete");
    assert_eq!(
        runtime_containers(&fixture, &doomed).await.len(),
        1,
        "nothing removes it while the daemon is down"
    );

    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    // The pass removes the sandbox first and the log directory last.
    eventually_async(
        "the deleted pod's sandbox, containers and log directory are gone",
        || async {
            runtime_sandboxes(&fixture, &doomed).await.is_empty()
                && runtime_containers(&fixture, &doomed).await.is_empty()
                && !log_dir(dir.path(), &doomed).exists()
        },
    )
    .await;
    assert!(!leased_to(&ip, &sandbox), "the pod's address is released");
    assert_eq!(
        runtime_containers(&fixture, &done).await,
        done_containers,
        "a Succeeded pod still in the API keeps its dead container"
    );
    assert_eq!(runtime_sandboxes(&fixture, &done).await.len(), 1);
    assert!(log_dir(dir.path(), &done).is_dir());
    drop(daemon);
}
