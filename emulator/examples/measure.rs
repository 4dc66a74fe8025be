//! Measures the figures issue 3 asks for, on this machine:
//! - lease PUTs per second (nodepulse's steady-state write: GET-free renewals with the cached
//!   resourceVersion), with 2 HTTP workers and the load generator in the same process;
//! - resident memory per 1,000 stored kubelet-sized Node objects.
//!
//! Run with `cargo run --release -p nodepulse-emulator --example measure [seconds] [clients]`.

use std::time::{Duration, Instant, SystemTime};

use nodepulse_emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let emulator = Emulator::start(EmulatorConfig {
        workers: 2,
        ..EmulatorConfig::for_tests()
    })
    .await?;
    let base = emulator.base_url();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()?;

    let puts = lease_puts(&http, &base, clients, Duration::from_secs(seconds)).await?;
    println!(
        "lease PUTs: {puts:.0}/s ({clients} concurrent clients, {seconds}s, 2 workers, load generator in-process)"
    );

    let before = resident_bytes();
    for i in 0..1000 {
        let reply = http
            .post(format!("{base}/api/v1/nodes"))
            .json(&kubelet_sized_node(i))
            .send()
            .await?;
        if reply.status().as_u16() != 201 {
            return Err(format!("node create failed: {}", reply.status()).into());
        }
    }
    let after = resident_bytes();
    let size = serde_json::to_vec(&kubelet_sized_node(0))?.len();
    println!(
        "memory: {:.1} MiB resident per 1,000 nodes (~{:.1} KiB each, JSON {:.1} KiB)",
        (after.saturating_sub(before)) as f64 / (1024.0 * 1024.0),
        (after.saturating_sub(before)) as f64 / 1000.0 / 1024.0,
        size as f64 / 1024.0
    );
    emulator.shutdown().await;
    Ok(())
}

/// Each client renews its own lease with PUT, reusing the returned resourceVersion.
async fn lease_puts(
    http: &reqwest::Client,
    base: &str,
    clients: usize,
    duration: Duration,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut tasks = Vec::new();
    let deadline = Instant::now() + duration;
    for i in 0..clients {
        let collection =
            format!("{base}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases");
        let lease = json!({"metadata": {"name": format!("node-{i}")}, "spec": {"holderIdentity": format!("node-{i}"), "leaseDurationSeconds": 40}});
        let mut current: Value = http
            .post(&collection)
            .json(&lease)
            .send()
            .await?
            .json()
            .await?;
        let http = http.clone();
        let url = format!("{collection}/node-{i}");
        tasks.push(tokio::spawn(async move {
            let mut count = 0u64;
            while Instant::now() < deadline {
                current["spec"]["renewTime"] =
                    nodepulse_emulator::time::format_micro_time(SystemTime::now()).into();
                let Ok(reply) = http.put(&url).json(&current).send().await else {
                    break;
                };
                let Ok(body) = reply.json::<Value>().await else {
                    break;
                };
                current = body;
                count += 1;
            }
            count
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    for task in tasks {
        total += task.await?;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// A Node the size a kubelet posts: conditions, addresses, capacity, nodeInfo, 20 images.
fn kubelet_sized_node(i: usize) -> Value {
    let images: Vec<Value> = (0..20)
        .map(|j| json!({"names": [format!("registry.example.com/team/image-{j}@sha256:{:064x}", j), format!("registry.example.com/team/image-{j}:v1.{j}")], "sizeBytes": 123_456_789 + j}))
        .collect();
    let conditions: Vec<Value> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| json!({"type": t, "status": if *t == "Ready" { "True" } else { "False" }, "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": format!("Kubelet{t}"), "message": "kubelet is posting ready status"}))
        .collect();
    json!({"metadata": {"name": format!("node-{i:05}"), "labels": {"kubernetes.io/hostname": format!("node-{i:05}"),
            "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.large"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"], "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {"conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": format!("node-{i:05}")}],
            "capacity": {"cpu": "2", "memory": "8010436Ki", "pods": "110", "ephemeral-storage": "101430960Ki"},
            "allocatable": {"cpu": "1930m", "memory": "7208132Ki", "pods": "110", "ephemeral-storage": "93478772582"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2b3c1d", "systemUUID": "ec2b3c1d-0000", "bootID": "5b1c", "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.36.0",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images}})
}

/// Resident set size from /proc/self/statm (Linux); 0 elsewhere.
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .unwrap_or(0);
    pages * 4096
}
