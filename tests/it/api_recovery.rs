//! A control-plane restart under a running node: the emulator really down (listener closed,
//! every connection and watch cut, or watches ended cleanly first) for
//! `NODEPULSE_OUTAGE_SECONDS` (20 by default; the case is 60), then back with the same
//! objects. The daemon, as a process, says so once, shows it in `/metrics` and `/debug/node`,
//! and once the server answers renews its Lease and runs a newly bound pod without waiting out
//! its backoffs. (The 1,000-node fleet's outage is in `tests/heavy`: it needs the machine to
//! itself.) Run with `--nocapture` for the figures.

use std::time::{Duration, Instant, SystemTime};

use nodepulse_emulator::{Outage, OutageReport};
use nodepulse_testkit::{
    attack::{clean_up, needs_emulator, running_pod, wait_ready_with_lease},
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually, eventually_async,
    objects::events_about,
    outage::{leases_renewed, outage_length, watch_resumed},
};
use serde_json::Value;

/// The goals (issue 19), asserted with [`SLACK`] for a loaded machine on top.
const LEASE_GOAL: Duration = Duration::from_secs(2);
const POD_GOAL: Duration = Duration::from_secs(3);
const SLACK: Duration = Duration::from_secs(3);
/// How long after the server is back the pod is bound (the case).
const POD_BOUND_AFTER: Duration = Duration::from_secs(1);

async fn debug_text(daemon: &DaemonProcess, path: &str) -> String {
    reqwest::get(format!("{}{path}", daemon.debug))
        .await
        .expect("the debug endpoint answers")
        .text()
        .await
        .expect("a body")
}

/// `nodepulse_api_unreachable_since_seconds` and `/debug/node`'s `apiUnreachableSince`.
async fn unreachable_since(daemon: &DaemonProcess) -> (f64, Value) {
    let metrics = debug_text(daemon, "/metrics").await;
    let gauge = metrics
        .lines()
        .find_map(|line| line.strip_prefix("nodepulse_api_unreachable_since_seconds "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no unreachable gauge in:\n{metrics}"));
    let (_, node) = daemon.get("/debug/node").await;
    (gauge, node["apiUnreachableSince"].clone())
}

/// The Events a node records when it registers (Ready from the start: no `NodeReady`).
const START_UP_EVENTS: [&str; 4] = [
    "Starting",
    "NodeHasSufficientMemory",
    "NodeHasNoDiskPressure",
    "NodeHasSufficientPID",
];

/// Waits until the node's start-up Events are in the API. They are written after the
/// registration that caused them, so one can still be on its way when the node first shows
/// Ready: the outage then meets a settled node, as it does the Lease and the status. (A run
/// with 20 tests in parallel once logged the cut write of `Starting` as a WARN, when Events
/// were not yet tried again.)
async fn start_up_events_written(cluster: &TestCluster, name: &str) {
    eventually_async("the start-up Events are written", || async {
        for reason in START_UP_EVENTS {
            if events_about(cluster, name, reason).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
}

/// The daemon through one outage of `kind`: the figures and checks the issue asks for.
async fn daemon_recovers_from(test: &str, kind: fn(Duration) -> Outage) {
    let cluster = TestCluster::start().await;
    if !needs_emulator(&cluster, test) {
        return;
    }
    let name = unique_node_name("recovery");
    // The kubelet's defaults: renewals 10 s apart, so a renewal within 2 s is the recovery's.
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config("")).await;
    wait_ready_with_lease(&cluster.client, &name).await;
    start_up_events_written(&cluster, &name).await;
    let faults = cluster.faults();
    let down = outage_length();
    let went_down = SystemTime::now();
    faults
        .schedule_outage(kind(down))
        .expect("the outage starts");

    eventually_async("the daemon shows the API unreachable", || async {
        let (gauge, since) = unreachable_since(&daemon).await;
        gauge > 0.0 && since.is_string()
    })
    .await;
    let OutageReport { came_back, .. } = faults.outage_over().await.expect("the server is back");

    let lease_after = leases_renewed(
        &cluster.client,
        std::slice::from_ref(&name),
        went_down,
        came_back,
    )
    .await;
    tokio::time::sleep_until((came_back + POD_BOUND_AFTER).into()).await;
    let bound = Instant::now();
    running_pod(&cluster.client, &name, &format!("{name}-after-outage")).await;
    let pod_after = bound.elapsed();
    let emulator = cluster.emulator.as_ref().expect("the emulator");
    eventually("both watches resumed", || {
        let requests = emulator.requests();
        watch_resumed(&requests, "nodes", came_back).is_some()
            && watch_resumed(&requests, "pods", came_back).is_some()
    })
    .await;
    let requests = emulator.requests();
    let node_watch = watch_resumed(&requests, "nodes", came_back);
    let pod_watch = watch_resumed(&requests, "pods", came_back);
    eprintln!(
        "{test}: down {down:?}; API back → Lease renewed {lease_after:?}, → node watch {node_watch:?}, pod watch {pod_watch:?}; pod bound {POD_BOUND_AFTER:?} after → Running {pod_after:?}"
    );
    assert!(
        lease_after <= LEASE_GOAL + SLACK,
        "Lease renewed {lease_after:?} after the API was back"
    );
    assert!(
        pod_after <= POD_GOAL + SLACK,
        "pod Running {pod_after:?} after it was bound"
    );

    eventually_async("the daemon shows the API reachable", || async {
        unreachable_since(&daemon).await == (0.0, Value::Null)
    })
    .await;
    let lines = daemon.log_lines();
    let events: Vec<Value> = lines
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let count = |message: &str| events.iter().filter(|e| e["message"] == message).count();
    let unreachable = "API server unreachable; retrying until it answers";
    let warned: Vec<&Value> = events
        .iter()
        .filter(|e| e["message"] == unreachable)
        .collect();
    assert_eq!(warned.len(), 1, "one WARN: {warned:#?}");
    // Between it and the return, only reminders: the failed retries say nothing new.
    let during: Vec<&Value> = events
        .iter()
        .skip_while(|e| e["message"] != unreachable)
        .skip(1)
        .take_while(|e| e["message"] != "API server reachable again")
        .filter(|e| e["level"] == "WARN" && e["message"] != "API server still unreachable")
        .collect();
    assert!(
        during.is_empty(),
        "WARN lines during the outage: {during:?}"
    );
    let reminders = count("API server still unreachable");
    assert!(
        reminders as u64 <= (down.as_secs() + 1) / 60,
        "{reminders} reminders in {down:?}"
    );
    let back: Vec<&Value> = events
        .iter()
        .filter(|e| e["message"] == "API server reachable again")
        .collect();
    assert_eq!(back.len(), 1, "one INFO when it is back");
    assert_eq!(back[0]["level"], "INFO");
    assert!(back[0]["down_for"].is_string(), "{}", back[0]);
    let errors: Vec<&Value> = events.iter().filter(|e| e["level"] == "ERROR").collect();
    assert!(errors.is_empty(), "no ERROR lines: {errors:?}");
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn after_an_abrupt_outage_the_lease_is_renewed_and_a_new_pod_runs_at_once() {
    daemon_recovers_from(
        "after_an_abrupt_outage_the_lease_is_renewed_and_a_new_pod_runs_at_once",
        Outage::abrupt,
    )
    .await;
}

#[actix_rt::test]
async fn after_a_graceful_outage_the_lease_is_renewed_and_a_new_pod_runs_at_once() {
    daemon_recovers_from(
        "after_a_graceful_outage_the_lease_is_renewed_and_a_new_pod_runs_at_once",
        Outage::graceful,
    )
    .await;
}
