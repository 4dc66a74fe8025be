//! A real `kubectl` against the cluster: get, describe node, get lease, get -w.
//! Skips when kubectl is not installed, except in CI (`CI=true`), where that is a failure.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::{Cluster, eventually, unique};

fn kubectl_available(test: &str) -> bool {
    let found = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "kubectl is required in CI (run emulator/ci-setup.sh)"
        );
        crate::common::skipped(test, "kubectl (run emulator/ci-setup.sh)");
    }
    found
}

fn kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn kubectl_gets_and_describes_nodes_and_leases() {
    if !kubectl_available("kubectl_gets_and_describes_nodes_and_leases") {
        return;
    }
    let cluster = Cluster::start().await;
    let name = unique("kctl");
    cluster.create_node(&name).await;
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        "nodeInfo": {"kubeletVersion": "v1.36.0-nodepulse", "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}});
    assert_eq!(
        cluster
            .patch(
                &format!("/api/v1/nodes/{name}/status"),
                "application/strategic-merge-patch+json",
                &status
            )
            .await
            .status,
        200
    );
    let lease = json!({"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}});
    assert_eq!(
        cluster
            .post(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                &lease
            )
            .await
            .status,
        201
    );

    let nodes = kubectl(&cluster, &["get", "nodes"]);
    let row = nodes
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        (cells.get(1), cells.last()),
        (Some(&"Ready"), Some(&"v1.36.0-nodepulse")),
        "server-side table columns: {nodes}"
    );
    let described = kubectl(&cluster, &["describe", "node", &name]);
    assert!(
        described.contains(&format!("Name:               {name}")),
        "{described}"
    );
    assert!(described.contains("KubeletReady"), "{described}");
    assert!(
        described.contains(&format!("HolderIdentity:  {name}")),
        "describe shows the lease: {described}"
    );
    let leases = kubectl(
        &cluster,
        &[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            &name,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    assert_eq!(leases, name);
}

#[tokio::test]
async fn kubectl_get_watch_prints_changes() {
    if !kubectl_available("kubectl_get_watch_prints_changes") {
        return;
    }
    let cluster = Cluster::start().await;
    let name = unique("kwatch");
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args([
            "get",
            "nodes",
            "-w",
            "--request-timeout=20s",
            "-o",
            "name",
            "--field-selector",
            &format!("metadata.name={name}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line);
            if seen.len() >= 2 {
                break;
            }
        }
        seen
    });
    // kubectl may connect after the create; creating until the watch reports keeps the test robust.
    let created = cluster.create_node(&name).await;
    let path = format!("/api/v1/nodes/{name}");
    eventually(
        "kubectl reports the node twice",
        Duration::from_secs(20),
        || async {
            cluster
                .patch(
                    &path,
                    "application/merge-patch+json",
                    &json!({"metadata": {"annotations": {"tick": unique("t")}}}),
                )
                .await;
            reader.is_finished().then_some(())
        },
    )
    .await;
    let seen = reader.await.expect("reader task");
    assert!(
        seen.iter().all(|l| l == &format!("node/{name}")),
        "{seen:?}"
    );
    assert!(created["metadata"]["name"].is_string());
    let _ = child.kill().await;
}
