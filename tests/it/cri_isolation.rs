//! What a pod asks of its sandbox on a real `runtime: cri` node (containerd), against an API
//! server (the emulator, or a real cluster): `seccompProfile: RuntimeDefault` stops a system
//! call containerd's default profile denies (an unprivileged `unshare` of a user namespace)
//! where `Unconfined` lets it through, a `Localhost` profile under `<rootDir>/seccomp` is the
//! one applied, a pod asking for AppArmor on a host without it is refused at admission, and a
//! pod whose RuntimeClass names a handler the runtime lacks gets that handler passed to
//! RunPodSandbox and stays Pending with the kubelet's `FailedCreatePodSandBox` event.

use std::path::Path;

use k8s_openapi::api::{core::v1::Pod, node::v1::RuntimeClass};
use kube::{Api, api::PostParams};
use nodepulse_actors::pods::apparmor;
use serde_json::{Value, json};

use crate::cri_pods::{NAMESPACE, Setup, runtime_containers, shell};
use nodepulse_testkit::{
    cleanup::{Owned, own},
    objects::wait_pod_event,
    pods::{create, phase, pod_manifest, wait_pod},
    skip,
};

/// Reports, into the termination message, the seccomp mode of PID 1 and whether an
/// unprivileged user namespace and a chmod are allowed.
const PROBE: &str = "{ grep '^Seccomp:' /proc/1/status; \
    unshare -U true && echo unshare-allowed; \
    touch /tmp/f && chmod 600 /tmp/f && echo chmod-allowed; } > /dev/termination-log 2>&1; \
    exit 0";

/// A profile that allows everything but changing a file's mode.
const DENY_CHMOD: &str = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
    {"names": ["chmod", "fchmod", "fchmodat", "fchmodat2"], "action": "SCMP_ACT_ERRNO"}]}"#;

fn probe_pod(seccomp: Value) -> Value {
    let mut container = shell("app", PROBE);
    container["securityContext"] = json!({"seccompProfile": seccomp});
    json!({"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [container]}})
}

fn termination_message(pod: &Pod) -> String {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let terminated = status
        .and_then(|all| all.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    terminated
        .and_then(|t| t.message.clone())
        .unwrap_or_default()
}

/// Runs pod `name` to its end and returns what its probe found.
async fn probe(setup: &Setup, name: &str, seccomp: Value) -> String {
    let client = &setup.cluster.client;
    let manifest = pod_manifest(name, NAMESPACE, &setup.node.name, probe_pod(seccomp));
    create(client, &manifest).await;
    let pod = wait_pod(client, NAMESPACE, name, "finished", |pod| {
        matches!(phase(pod), Some("Succeeded" | "Failed"))
    })
    .await;
    assert_eq!(phase(&pod), Some("Succeeded"), "{:?}", pod.status);
    termination_message(&pod)
}

#[actix_rt::test]
async fn runtime_default_blocks_what_unconfined_allows_and_a_localhost_profile_applies() {
    let test = "runtime_default_blocks_what_unconfined_allows_and_a_localhost_profile_applies";
    let Some(setup) = Setup::start(test, "cri-seccomp").await else {
        return;
    };
    let node = &setup.node;
    let profiles = node.root_dir().join("seccomp/nodepulse-test");
    std::fs::create_dir_all(&profiles).expect("the profile directory");
    std::fs::write(profiles.join("deny-chmod.json"), DENY_CHMOD).expect("the profile");
    node.guard(async {
        let confined = probe(
            &setup,
            &format!("{}-default", node.name),
            json!({"type": "RuntimeDefault"}),
        )
        .await;
        assert!(confined.contains("Seccomp:\t2\n"), "{confined}");
        assert!(!confined.contains("unshare-allowed"), "{confined}");
        assert!(confined.contains("Operation not permitted"), "{confined}");
        assert!(confined.contains("chmod-allowed"), "{confined}");

        let unconfined = probe(
            &setup,
            &format!("{}-unconfined", node.name),
            json!({"type": "Unconfined"}),
        )
        .await;
        assert!(unconfined.contains("Seccomp:\t0\n"), "{unconfined}");
        assert!(unconfined.contains("unshare-allowed"), "{unconfined}");

        let local = probe(
            &setup,
            &format!("{}-local", node.name),
            json!({"type": "Localhost", "localhostProfile": "nodepulse-test/deny-chmod.json"}),
        )
        .await;
        assert!(local.contains("Seccomp:\t2\n"), "{local}");
        assert!(local.contains("unshare-allowed"), "{local}");
        assert!(!local.contains("chmod-allowed"), "{local}");
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_asking_for_apparmor_on_a_host_without_it_is_refused_at_admission() {
    let test = "a_pod_asking_for_apparmor_on_a_host_without_it_is_refused_at_admission";
    if apparmor::host_support(Path::new("/sys")).is_ok() {
        skip::skipped(test, "a host without AppArmor");
        return;
    }
    let Some(setup) = Setup::start(test, "cri-apparmor").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-confined", node.name);
        let mut container = shell("app", "true");
        container["securityContext"] = json!({"appArmorProfile": {"type": "RuntimeDefault"}});
        let spec = json!({"spec": {"restartPolicy": "Never", "containers": [container]}});
        create(
            &cluster.client,
            &pod_manifest(&name, NAMESPACE, &node.name, spec),
        )
        .await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "Failed", |pod| {
            phase(pod) == Some("Failed")
        })
        .await;
        let status = pod.status.clone().expect("a status");
        assert_eq!(status.reason.as_deref(), Some("AppArmor"));
        assert_eq!(
            status.message.as_deref(),
            Some("Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host")
        );
        wait_pod_event(cluster, &pod, "Warning", "AppArmor", |m| {
            m == "Cannot enforce AppArmor: AppArmor is not enabled on the host"
        })
        .await;
        assert!(
            runtime_containers(&setup.fixture, &pod).await.is_empty(),
            "a refused pod starts nothing"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_runtime_class_handler_reaches_the_runtime_and_an_unknown_one_fails_the_sandbox() {
    let test = "a_runtime_class_handler_reaches_the_runtime_and_an_unknown_one_fails_the_sandbox";
    let Some(setup) = Setup::start(test, "cri-rtclass").await else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    let class = format!("{}-unconfigured", node.name);
    let handler = format!("{}-handler", node.name);
    own(Owned::Object {
        path: format!("/apis/node.k8s.io/v1/runtimeclasses/{class}"),
    });
    let classes: Api<RuntimeClass> = Api::all(cluster.client.clone());
    let manifest: RuntimeClass = serde_json::from_value(json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": class}, "handler": handler}))
    .expect("a RuntimeClass");
    classes
        .create(&PostParams::default(), &manifest)
        .await
        .expect("the RuntimeClass is created");
    node.guard(async {
        let name = format!("{}-classy", node.name);
        let spec = json!({"spec": {"runtimeClassName": class,
            "containers": [shell("app", "true")]}});
        create(
            &cluster.client,
            &pod_manifest(&name, NAMESPACE, &node.name, spec),
        )
        .await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "known", |_| true).await;
        // containerd names the handler it has no runtime for.
        wait_pod_event(cluster, &pod, "Warning", "FailedCreatePodSandBox", |m| {
            m.starts_with("Failed to create pod sandbox: ") && m.contains(&handler)
        })
        .await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "known", |_| true).await;
        assert_eq!(phase(&pod), Some("Pending"));
        assert!(
            runtime_containers(&setup.fixture, &pod).await.is_empty(),
            "no sandbox, no container"
        );
    })
    .await;
}
