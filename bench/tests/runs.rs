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
