//! YAML alias bombs (issue 53): one anchor referenced many times expands with the square of
//! the text. In `staticPodPath`, at `staticPodURL` and in the config file such a document is
//! refused as "excessive aliasing" without being expanded: the daemon logs it as the kubelet
//! does, keeps running and loads the other manifests, and its peak resident memory (`VmHWM`)
//! barely moves; `check-config` refuses the file with exit 2, peaking where it does on a small bad file.

use std::{path::Path, process::Command};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::static_pod_url::ManifestServer;
use nodepulse_testkit::{
    attack::clean_up,
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async, oci_image,
};

/// Anchored items, and as many references to the anchor: 2.25 million nodes from 11 KB, some
/// 150 MiB once expanded into a JSON tree (the size of the text grows it with its square).
const BOMB_ITEMS: usize = 1_500;
/// What reading a refused bomb may add to the daemon's peak (a few parses of its 11 KB).
const ALLOWED_GROWTH_KIB: u64 = 32 * 1024;

/// `items` anchored scalars and `items` aliases of them.
fn anchor_and_aliases(items: usize) -> (String, String) {
    (vec!["x"; items].join(","), vec!["*a"; items].join(","))
}

/// A valid static pod with the bomb in fields nobody reads.
fn pod_bomb() -> String {
    let (anchor, aliases) = anchor_and_aliases(BOMB_ITEMS);
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: bomb}}\nspec: {{containers: [{{name: app, image: busybox}}]}}\nx: &a [{anchor}]\ny: [{aliases}]\n"
    )
}

/// Waits until the daemon read the bomb: refused it (its `message` event names excessive
/// aliasing) or took it (the pod's mirror is in the API); then its peak may have grown by
/// [`ALLOWED_GROWTH_KIB`] at most, and it must have refused.
async fn refused_barely_growing(
    (daemon, node): (&DaemonProcess, &str),
    pods: &Api<Pod>,
    message: &str,
    before: u64,
) {
    let refused = || {
        daemon.events(message).iter().any(|event| {
            (event["error"].as_str()).is_some_and(|e| e.contains("excessive aliasing"))
        })
    };
    let mirror = format!("bomb-{}", node.to_lowercase());
    eventually_async("the daemon read the bomb", || async {
        refused() || pods.get_opt(&mirror).await.ok().flatten().is_some()
    })
    .await;
    assert_barely_grew(daemon, before);
    assert!(refused(), "the bomb's pod was taken");
}

fn assert_barely_grew(daemon: &DaemonProcess, before: u64) {
    let after = daemon.peak_resident_kib();
    assert!(
        after.saturating_sub(before) < ALLOWED_GROWTH_KIB,
        "the daemon's peak resident memory went from {before} KiB to {after} KiB"
    );
}

#[actix_rt::test]
async fn an_alias_bomb_in_static_pod_path_is_refused_and_the_other_manifests_load() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("alias-bomb-file");
    let manifests = tempfile::tempdir().expect("a manifest directory");
    let config = format!(
        "staticPodPath: {}\nfileCheckFrequency: 20s\n",
        manifests.path().display()
    );
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config(&config)).await;
    let before = daemon.peak_resident_kib();
    write(manifests.path(), "bomb.yaml", &pod_bomb());
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let message = "Could not process manifest file";
    refused_barely_growing((&daemon, &name), &pods, message, before).await;

    // The source goes on: a good manifest beside the bomb gets its mirror pod.
    write(
        manifests.path(),
        "good.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec: {containers: [{name: app, image: busybox}]}\n",
    );
    let mirror = format!("good-{}", name.to_lowercase());
    eventually_async("the good manifest's mirror pod", || async {
        pods.get_opt(&mirror).await.ok().flatten().is_some()
    })
    .await;
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn an_alias_bomb_at_static_pod_url_is_refused_without_growing_the_daemon() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("alias-bomb-url");
    let server = ManifestServer::start().await;
    let config = format!("staticPodURL: {}\nhttpCheckFrequency: 1s\n", server.url);
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config(&config)).await;
    let before = daemon.peak_resident_kib();
    server.answer("200 OK", pod_bomb());
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let message = "Failed to read pods from URL";
    refused_barely_growing((&daemon, &name), &pods, message, before).await;
    clean_up(&cluster, daemon, &name).await;
}

#[test]
fn check_config_refuses_an_alias_bomb_in_what_a_small_bad_file_costs() {
    let test = "check_config_refuses_an_alias_bomb_in_what_a_small_bad_file_costs";
    if oci_image::busybox_required(test).is_none() {
        return;
    }
    let directory = tempfile::tempdir().expect("temp dir");
    let small = write(
        directory.path(),
        "small.yaml",
        "nodeStatusUpdateFreqency: 10s\n",
    );
    let (_, baseline_kib) = check_config(&small);
    // Each header name takes the anchored list of values.
    let (anchor, _) = anchor_and_aliases(BOMB_ITEMS);
    let headers: String = (0..BOMB_ITEMS).map(|i| format!("  h{i}: *a\n")).collect();
    let bomb = format!("staticPodURLHeader:\n  h: &a [{anchor}]\n{headers}");
    let (output, peak_kib) = check_config(&write(directory.path(), "bomb.yaml", &bomb));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("(top level): document contains excessive aliasing"),
        "{stderr}"
    );
    assert!(
        peak_kib < baseline_kib + ALLOWED_GROWTH_KIB,
        "check-config peaked at {peak_kib} KiB on the bomb, {baseline_kib} KiB on a small bad file"
    );
}

/// `nodepulse check-config file` under busybox's `time -v`, which reports the child's own
/// peak resident memory (its rusage, exact for a short process): the output and the peak.
fn check_config(file: &Path) -> (std::process::Output, u64) {
    let output = Command::new("/bin/busybox")
        .args([
            "time",
            "-v",
            env!("CARGO_BIN_EXE_nodepulse"),
            "check-config",
        ])
        .arg(file)
        .env_remove("KUBECONFIG")
        .output()
        .expect("busybox time runs");
    let peak_kib = (String::from_utf8_lossy(&output.stderr).lines())
        .find_map(|line| {
            line.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|kib| kib.parse().ok())
        .expect("busybox time reports the peak");
    (output, peak_kib)
}

fn write(directory: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = directory.join(name);
    std::fs::write(&path, text).expect("written");
    path
}
