//! The daemon's steady use with 30 running pods: the ship `nodepulse` binary as its own
//! process on the fixture's containerd, 30 pods bound and Running, then its CPU time (from
//! `/proc/<pid>/stat`) and resident memory (`VmRSS`, sampled each second) over 60 s.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{bound_to_running, millis};
use nodepulse_testkit::{
    cleanup,
    cluster::{TestCluster, unique_node_name},
    cri_fixture::CriFixture,
    cri_node::cri_node_config,
};

const PODS: usize = 30;
const WINDOW: Duration = Duration::from_secs(60);
/// Time for the start-up's work (pulls, first statuses, the first GC pass) to settle.
const SETTLE: Duration = Duration::from_secs(10);

/// The daemon's user + system CPU time so far, in clock ticks (fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon's stat");
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("a tick count");
    field(14) + field(15)
}

/// `VmRSS` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the daemon's status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn clock_ticks_per_second() -> f64 {
    let output = Command::new("getconf").arg("CLK_TCK").output();
    output
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

fn start_daemon(kubeconfig: &std::path::Path, node: &str, config: &std::path::Path) -> Child {
    let binary = std::env::current_exe()
        .expect("this example's path")
        .parent()
        .and_then(|examples| examples.parent())
        .expect("the profile directory")
        .join("nodepulse");
    Command::new(&binary)
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--node-name", node])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("{}: {error} (cargo build --profile ship)", binary.display())
        })
}

pub async fn run() {
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-steady").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let node = unique_node_name("cri-steady");
    cleanup::own_node(&node);
    let config = dir.path().join("nodepulse.yaml");
    // The debug endpoint on a port of its own: never the fixed 10280 others may hold.
    let yaml = format!(
        "{}debug:\n  address: 127.0.0.1:0\n",
        cri_node_config(&fixture, dir.path())
    );
    std::fs::write(&config, yaml).expect("config");
    let mut daemon = start_daemon(&cluster.kubeconfig, &node, &config);
    let pid = daemon.id();

    let started = Instant::now();
    let names: Vec<String> = (0..PODS).map(|i| format!("{node}-steady-{i}")).collect();
    futures::future::join_all(
        names
            .iter()
            .map(|name| bound_to_running(&cluster.client, name, &node)),
    )
    .await;
    let all_running = started.elapsed();
    tokio::time::sleep(SETTLE).await;

    let ticks = clock_ticks_per_second();
    let cpu_before = cpu_ticks(pid);
    let window = Instant::now();
    let mut rss = Vec::new();
    while window.elapsed() < WINDOW {
        rss.push(rss_kib(pid));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let seconds = window.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - cpu_before) as f64 / ticks / seconds;
    rss.sort_unstable();
    let mib = |kib: u64| (kib as f64 / 1024.0 * 10.0).round() / 10.0;
    let figures = json!({
        "steady": {
            "pods": PODS,
            "allRunningMs": millis(all_running),
            "windowS": seconds.round(),
            "cpuMillicores": (cpu * 1e4).round() / 10.0,
            "rssMiB": {"p50": mib(rss[rss.len() / 2]), "max": mib(rss[rss.len() - 1])},
        },
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&figures).unwrap_or_default()
    );
    // SIGKILL, as a crash: its pods stay, and the fixture removes them with the sandboxes.
    let _ = daemon.kill();
    let _ = daemon.wait();
}
