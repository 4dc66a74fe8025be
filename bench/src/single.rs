//! One node's cost, with the daemon as its own process against the emulator in another, talking
//! through the counting proxy: process start → Ready=True in the API, then over a steady-state
//! window resident memory, CPU, and requests and bytes per node-minute on the wire.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    config::{KubeConfigOptions, Kubeconfig},
};
use nodepulse::apiserver_client::node::is_ready;
use serde_json::{Value, json};

use crate::{
    processes::{Running, daemon_binary, free_port, start_emulator},
    procfs,
    proxy::{self, Traffic},
    text_layout,
};

const NODE: &str = "bench-node-1";

/// A client for `server`, from the kubeconfig the emulator would write.
pub async fn client(server: &str) -> Result<kube::Client, String> {
    let text = nodepulse_emulator::kubeconfig::render(server, None);
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|error| error.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|error| error.to_string())?;
    kube::Client::try_from(config).map_err(|error| error.to_string())
}

fn per_minute(count: u64, window: Duration) -> f64 {
    count as f64 * 60.0 / window.as_secs_f64()
}

/// The thread names of `pid`, each with how many threads carry it (`/proc/<pid>/task/*/comm`).
fn thread_names(pid: u32) -> serde_json::Map<String, Value> {
    let mut names = std::collections::BTreeMap::<String, u64>::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    for task in tasks.flatten() {
        if let Ok(name) = std::fs::read_to_string(task.path().join("comm")) {
            *names.entry(name.trim().to_owned()).or_default() += 1;
        }
    }
    names
        .into_iter()
        .map(|(name, count)| (name, json!(count)))
        .collect()
}

/// Runs the daemon `daemon` (the `nodepulse` beside this binary unless given) and measures it;
/// one with a stale text layout only when `any_layout`.
pub async fn run(
    window: Duration,
    scratch: &Path,
    daemon: Option<&Path>,
    any_layout: bool,
) -> Result<Value, String> {
    let binary = daemon_binary(daemon)?;
    let layout = text_layout::checked(&binary, any_layout)?;
    let binary_bytes = std::fs::metadata(&binary)
        .map_err(|error| format!("{}: {error}", binary.display()))?
        .len();
    let (_emulator, api_address) = start_emulator()?;
    let (proxy_address, traffic) = proxy::start(api_address)
        .await
        .map_err(|error| error.to_string())?;
    let kubeconfig = scratch.join("kubeconfig");
    let config = scratch.join("nodepulse.yaml");
    std::fs::write(
        &kubeconfig,
        nodepulse_emulator::kubeconfig::render(&format!("http://{proxy_address}"), None),
    )
    .map_err(|error| error.to_string())?;
    let debug_port = free_port().map_err(|error| error.to_string())?;
    std::fs::write(
        &config,
        format!("runtime: simulated\ndebug:\n  address: 127.0.0.1:{debug_port}\n"),
    )
    .map_err(|error| error.to_string())?;

    let nodes = Api::<Node>::all(client(&format!("http://{api_address}")).await?);
    let started = Instant::now();
    let daemon = Running::spawn(
        &binary,
        &[
            "--config".into(),
            config.display().to_string(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--node-name".into(),
            NODE.into(),
        ],
    )?;
    loop {
        if nodes
            .get_opt(NODE)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| is_ready(&node))
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the node was not Ready within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let start_to_ready = started.elapsed();

    // Let start-up traffic (registration, first status, watches) settle before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = procfs::usage(daemon.pid()).map_err(|error| error.to_string())?;
    let wakeups_before = procfs::wakeups(daemon.pid()).map_err(|error| error.to_string())?;
    let traffic_before: Traffic = traffic.lock().map_err(|error| error.to_string())?.clone();
    let window_start = Instant::now();
    let mut peak_rss = before.rss_bytes;
    // Sampled sparsely: every sample wakes this process, not the daemon, but keeps the
    // machine a little busier than a quiet node's would be.
    while window_start.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(5).min(window)).await;
        let now = procfs::usage(daemon.pid()).map_err(|error| error.to_string())?;
        peak_rss = peak_rss.max(now.rss_bytes);
    }
    let elapsed = window_start.elapsed();
    let after = procfs::usage(daemon.pid()).map_err(|error| error.to_string())?;
    let wakeups = procfs::wakeups(daemon.pid())
        .map_err(|error| error.to_string())?
        .saturating_sub(wakeups_before);
    let wire = traffic
        .lock()
        .map_err(|error| error.to_string())?
        .since(&traffic_before);
    let requests: serde_json::Map<String, Value> = wire
        .requests
        .iter()
        .map(|(kind, count)| (kind.clone(), json!(per_minute(*count, elapsed))))
        .collect();
    Ok(json!({
        "binary": binary.display().to_string(),
        "binaryBytes": binary_bytes,
        "textLayout": layout.to_json(),
        "anonBytes": after.anon_bytes,
        "threads": after.threads,
        "threadNames": thread_names(daemon.pid()),
        "startToReadySeconds": start_to_ready.as_secs_f64(),
        "windowSeconds": elapsed.as_secs_f64(),
        "rssBytes": after.rss_bytes,
        "peakRssBytes": peak_rss,
        "cpuCores": (after.cpu_seconds - before.cpu_seconds) / elapsed.as_secs_f64(),
        "wakeupsPerSecond": wakeups as f64 / elapsed.as_secs_f64(),
        "requestsPerNodeMinute": requests,
        "requestsPerNodeMinuteTotal": per_minute(wire.requests.values().sum(), elapsed),
        "bytesPerNodeMinuteToServer": per_minute(wire.bytes_to_server, elapsed),
        "bytesPerNodeMinuteToClient": per_minute(wire.bytes_to_client, elapsed),
    }))
}
