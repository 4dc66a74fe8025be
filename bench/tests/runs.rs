//! The bench binary runs end to end on a tiny size (CI judges that it runs, not its figures):
//! `single`, `fleet` and `pods` write their result files with every figure present, and `plot`
//! renders a fleet file.

use std::process::Command;

use serde_json::Value;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nodepulse-bench"))
}

#[test]
fn single_runs_on_a_tiny_window_and_writes_every_figure() {
    let out = tempfile::tempdir().expect("temp dir");
    let status = bench()
        .args([
            "--out-dir",
            out.path().to_str().expect("utf-8"),
            "single",
            "--seconds",
            "2",
            "--samples",
            "4",
            // A debug daemon: no text layout.
            "--any-layout",
        ])
        .status()
        .expect("runs");
    assert!(status.success(), "nodepulse-bench single failed: {status}");
    let text = std::fs::read_to_string(out.path().join("single.json")).expect("single.json");
    let figures: Value = serde_json::from_str(&text).expect("json");
    for figure in [
        "startToReadySeconds",
        "rssBytes",
        "anonBytes",
        "threads",
        "binaryBytes",
        "cpuCores",
        "requestsPerNodeMinuteTotal",
        "bytesPerNodeMinuteToServer",
    ] {
        assert!(figures[figure].is_number(), "{figure} missing in {figures}");
    }
    assert!(figures["rssBytes"].as_u64().unwrap_or(0) > 0);
    assert_eq!(figures["latency"]["samples"], 4);
    assert!(
        figures["latency"]["inputToPatchSeconds"]["p50"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
    assert!(figures["machine"]["cores"].as_u64().unwrap_or(0) >= 1);
    assert!(
        figures["textLayout"]["listed"].as_u64().unwrap_or(0) > 0,
        "{figures}"
    );
}

#[test]
fn plot_renders_a_fleet_file_and_refuses_a_broken_one() {
    let out = tempfile::tempdir().expect("temp dir");
    let fleet = r#"{"runs": [
        {"nodes": 100, "rssBytes": 20971520, "renewalLagSeconds": {"p50": 0.01, "p99": 0.05}},
        {"nodes": 1000, "rssBytes": 104857600, "renewalLagSeconds": {"p50": 0.02, "p99": 0.3}}]}"#;
    std::fs::write(out.path().join("fleet.json"), fleet).expect("written");
    let dir = out.path().to_str().expect("utf-8");
    assert!(
        bench()
            .args(["--out-dir", dir, "plot"])
            .status()
            .expect("runs")
            .success()
    );
    let svg = std::fs::read_to_string(out.path().join("fleet.svg")).expect("fleet.svg");
    assert!(svg.contains("<polyline"));

    std::fs::write(out.path().join("fleet.json"), r#"{"runs": []}"#).expect("written");
    let output = bench()
        .args(["--out-dir", dir, "plot"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no runs"));
}

#[test]
fn fleet_runs_a_tiny_fleet_and_writes_its_run() {
    let out = tempfile::tempdir().expect("temp dir");
    let dir = out.path().to_str().expect("utf-8");
    let args = [
        "--out-dir",
        dir,
        "fleet",
        "--nodes",
        "3",
        "--warmup-seconds",
        "0",
        "--steady-seconds",
        "1",
    ];
    let status = bench().args(args).status().expect("runs");
    assert!(status.success(), "nodepulse-bench fleet failed: {status}");
    let text = std::fs::read_to_string(out.path().join("fleet.json")).expect("fleet.json");
    let fleet: Value = serde_json::from_str(&text).expect("json");
    let run = &fleet["runs"][0];
    assert_eq!(run["nodes"], 3);
    assert!(
        run["allReadySeconds"].as_f64().unwrap_or(0.0) > 0.0,
        "{run}"
    );
    assert!(run["rssBytes"].as_u64().unwrap_or(0) > 0, "{run}");
    assert!(run["renewalLagSeconds"]["p99"].is_number(), "{run}");
    assert_eq!(
        (&run["config"]["kubeAPIQPS"], &run["config"]["kubeAPIBurst"]),
        (&serde_json::json!(150), &serde_json::json!(300)),
        "no --qps: the fleet's defaults, 50 and 100 a node"
    );
}

#[test]
fn pods_runs_a_tiny_fleet_with_pods_and_writes_its_run() {
    let out = tempfile::tempdir().expect("temp dir");
    let dir = out.path().to_str().expect("utf-8");
    let args = [
        "--out-dir",
        dir,
        "pods",
        "--nodes",
        "2",
        "--pods",
        "4",
        "--settle-seconds",
        "0",
        "--warmup-seconds",
        "0",
        "--steady-seconds",
        "2",
    ];
    let status = bench().args(args).status().expect("runs");
    assert!(status.success(), "nodepulse-bench pods failed: {status}");
    let text = std::fs::read_to_string(out.path().join("pods.json")).expect("pods.json");
    let file: Value = serde_json::from_str(&text).expect("json");
    let run = &file["runs"][0];
    assert_eq!(
        (&run["nodes"], &run["pods"]),
        (&2.into(), &4.into()),
        "{run}"
    );
    for spread in ["boundToRunningSeconds", "deletedToGoneSeconds"] {
        assert_eq!(run[spread]["count"], 4, "every pod timed: {run}");
        assert!(run[spread]["last"].as_f64().unwrap_or(0.0) > 0.0, "{run}");
    }
    let requests = &run["steady"]["requests"];
    for group in [
        "leaseRenewals",
        "podGets",
        "podStatusPatches",
        "eventWrites",
        "other",
        "total",
    ] {
        assert!(requests[group].is_u64(), "{group} missing: {requests}");
    }
    for reading in ["beforePods", "withPods", "afterDelete"] {
        assert!(
            run["memory"][reading]["rssBytes"].as_u64().unwrap_or(0) > 0,
            "{reading}: {run}"
        );
    }
    assert!(run["memory"]["kibPerPod"].is_number(), "{run}");
    assert!(run["steady"]["cpuCores"].is_number(), "{run}");
}

#[test]
fn pods_refuses_a_fleet_or_a_load_of_nothing() {
    for flag in ["--nodes", "--pods"] {
        let output = bench()
            .args(["--out-dir", "/nonexistent", "pods", flag, "0"])
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{flag} 0 accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains("at least 1"),
            "{stderr}"
        );
    }
}

/// A process of this workspace, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A node's `rootDir`, whose mounts (its pods' projected volumes) are detached when dropped:
/// the agent leaves them in place when it is killed, as the kubelet does, and a pod deleted
/// just before may not have had its volumes torn down yet. Dropped after the agent.
struct NodeRoot(std::path::PathBuf);

impl Drop for NodeRoot {
    fn drop(&mut self) {
        if let Err(error) = nodepulse::volume_plugins::mount::detach_all_below(&self.0) {
            eprintln!(
                "cannot detach the mounts below {}: {error}",
                self.0.display()
            );
        }
    }
}

/// A binary built beside the bench's (`cargo test --workspace` builds them all).
fn sibling(name: &str) -> std::path::PathBuf {
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_nodepulse-bench"));
    let path = bench.with_file_name(name);
    assert!(
        path.is_file(),
        "{} missing: build the workspace",
        path.display()
    );
    path
}

fn spawn(binary: &std::path::Path, args: &[&str]) -> Child {
    Child(
        Command::new(binary)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawned"),
    )
}

/// `agents` measures an agent it did not start, given its kubeconfig, Node and PID: here a
/// simulated nodepulse node on the emulator (the side-by-side runs use real ones, see
/// bench/agents.sh), with two pods, so every figure and the pods' cleanup are checked.
#[test]
fn agents_measures_a_running_agent_and_deletes_its_pods() {
    let out = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let address = format!("127.0.0.1:{port}");
    let _emulator = spawn(&sibling("nodepulse-emulator"), &["--address", &address]);
    let kubeconfig = out.path().join("kubeconfig");
    let server = format!("http://{address}");
    std::fs::write(
        &kubeconfig,
        nodepulse_emulator::kubeconfig::render(&server, None),
    )
    .expect("written");
    let config = out.path().join("nodepulse.yaml");
    let root = NodeRoot(out.path().join("root"));
    std::fs::write(
        &config,
        format!(
            "runtime: simulated\nrootDir: {}\ndebug:\n  address: 127.0.0.1:0\n",
            root.0.display()
        ),
    )
    .expect("written");
    let (config, kubeconfig) = (
        config.to_str().expect("utf-8"),
        kubeconfig.to_str().expect("utf-8"),
    );
    let agent = spawn(
        &sibling("nodepulse"),
        &[
            "--config",
            config,
            "--kubeconfig",
            kubeconfig,
            "--node-name",
            "agents-sim",
        ],
    );
    let pid = agent.0.id().to_string();
    // No runtime here: this test's own process stands in for it.
    let runtime_pid = std::process::id().to_string();
    let dir = out.path().join("results");
    let args = [
        "--out-dir",
        dir.to_str().expect("utf-8"),
        "agents",
        "--kubeconfig",
        kubeconfig,
        "--node",
        "agents-sim",
        "--pid",
        &pid,
        "--runtime-pid",
        &runtime_pid,
        "--agent",
        "simulated",
        "--pods",
        "2,3",
        "--settle-seconds",
        "0",
        "--warmup-seconds",
        "0",
        "--steady-seconds",
        "1",
    ];
    let status = bench().args(args).status().expect("runs");
    assert!(status.success(), "nodepulse-bench agents failed: {status}");
    let text = std::fs::read_to_string(dir.join("agents.json")).expect("agents.json");
    let file: Value = serde_json::from_str(&text).expect("json");
    let runs = file["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "one run a size: {file}");
    for (run, pods) in runs.iter().zip([2, 3]) {
        assert_eq!(
            (&run["agent"], &run["pods"]),
            (&"simulated".into(), &pods.into()),
            "{run}"
        );
        for spread in ["createdToRunningSeconds", "deletedToGoneSeconds"] {
            assert_eq!(run[spread]["count"], pods, "every pod timed: {run}");
            assert!(run[spread]["p50"].as_f64().unwrap_or(0.0) > 0.0, "{run}");
        }
        let all_running = run["allRunningSeconds"].as_f64().unwrap_or(0.0);
        assert!(
            all_running
                >= run["createdToRunningSeconds"]["last"]
                    .as_f64()
                    .unwrap_or(f64::MAX),
            "{run}"
        );
        assert!(
            run["steady"]["memory"]["rssBytes"].as_u64().unwrap_or(0) > 0,
            "{run}"
        );
        assert!(run["steady"]["cpuCores"].is_number(), "{run}");
        // The machine's busy time holds the agent's (both counted in 10 ms ticks).
        let (machine, agent) = (
            run["machineCpuSecondsToRunning"].as_f64().unwrap_or(-1.0),
            run["cpuSecondsToRunning"].as_f64().unwrap_or(f64::MAX),
        );
        assert!(machine > 0.0 && machine + 0.02 >= agent, "{run}");
        let runtime = run["runtimeCpuSecondsToRunning"].as_f64().unwrap_or(-1.0);
        assert!((0.0..=machine + 0.02).contains(&runtime), "{run}");
        assert!(run["steady"]["runtime"]["cpuCores"].is_number(), "{run}");
        assert!(run["cores"].as_u64().unwrap_or(0) >= 1, "{run}");
        assert!(run["allGoneSeconds"].as_f64().unwrap_or(0.0) > 0.0, "{run}");
    }
}
