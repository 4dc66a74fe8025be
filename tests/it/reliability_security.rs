//! Security properties of a running daemon: fault injection is off unless configured and the
//! endpoint warns when bound beyond loopback; the fault-injection token (and near misses of
//! it) never reaches the logs, even at debug level; and under the emulator's node-restriction
//! mode, with only a node's own identity, the whole daemon — killed actors included — writes
//! nothing but its own Node, its own Lease, Events, the pods bound to it and the token of the
//! ServiceAccount its pod runs as.

use std::collections::BTreeSet;

use nodepulse_testkit::{
    attack::{clean_up, needs_emulator, wait_ready_with_lease},
    cluster::{TestCluster, unique_node_name},
    daemon::{DEBUG_TOKEN, DaemonProcess, attack_config},
    identity::NodeIdentityEmulator,
    pods::{create, pod_manifest, running_and_ready, wait_pod},
};
use reqwest::StatusCode;

#[actix_rt::test]
async fn fault_injection_is_off_by_default_and_a_wide_bind_is_warned_about() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("security-defaults");
    // No faultInjection section at all; bound to every interface.
    let daemon = DaemonProcess::start(
        &cluster.kubeconfig,
        &name,
        "runtime: simulated\nrootDir: /\ndebug:\n  address: 0.0.0.0:0\n",
    )
    .await;
    let warning = daemon
        .events("the debug endpoint is bound beyond loopback: anyone who can reach it sees the actors' internals")
        .into_iter()
        .next()
        .expect("a warning about the wide bind");
    assert_eq!(warning["level"], "WARN", "{warning}");
    for token in [Some(DEBUG_TOKEN), None] {
        let (status, body) = daemon
            .post("/debug/actors/lease/kill?mode=stop", token)
            .await;
        assert_eq!(
            (status, body["error"]["reason"].as_str()),
            (StatusCode::FORBIDDEN, Some("Forbidden")),
            "{body}"
        );
    }
    assert_eq!(daemon.snapshot("lease").await.restarts, 0);
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn the_fault_injection_token_never_reaches_the_logs() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("security-token");
    let yaml = attack_config(&nodepulse_testkit::attack::shortened_intervals(20));
    let daemon =
        DaemonProcess::start_with_env(&cluster.kubeconfig, &name, &yaml, &[("RUST_LOG", "debug")])
            .await;
    wait_ready_with_lease(&cluster.client, &name).await;
    // Near misses that a careless log line would print in full, then the real thing.
    let near_misses = [
        format!("{DEBUG_TOKEN}x"),
        DEBUG_TOKEN[..DEBUG_TOKEN.len() - 1].to_owned(),
        DEBUG_TOKEN.to_uppercase(),
    ];
    for wrong in &near_misses {
        let (status, _) = daemon
            .post("/debug/actors/lease/kill?mode=stop", Some(wrong))
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    daemon.kill_and_wait_restart("lease", "panic").await;
    daemon.kill_and_wait_restart("node-status", "stop").await;
    let (status, _) = daemon
        .post("/debug/actors/nobody/kill?mode=stop", Some(DEBUG_TOKEN))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let lines = daemon.log_lines();
    assert!(
        lines
            .iter()
            .any(|line| line.contains("\"level\":\"DEBUG\"")),
        "debug logging was on"
    );
    assert!(
        !daemon
            .events("killing actor instance on request (fault injection)")
            .is_empty(),
        "the kills were logged"
    );
    for secret in std::iter::once(DEBUG_TOKEN.to_owned()).chain(near_misses) {
        let leaked: Vec<&String> = lines.iter().filter(|line| line.contains(&secret)).collect();
        assert!(
            leaked.is_empty(),
            "the token {secret:?} was logged: {leaked:#?}"
        );
    }
    eprintln!(
        "TOKEN: {} log lines at debug level, none with the token",
        lines.len()
    );
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn under_node_restriction_the_daemon_writes_only_its_own_objects() {
    let probe = TestCluster::start().await;
    if !needs_emulator(
        &probe,
        "under_node_restriction_the_daemon_writes_only_its_own_objects",
    ) {
        return;
    }
    drop(probe);
    let name = unique_node_name("restricted");
    let restricted = NodeIdentityEmulator::start(&name).await;
    let admin = &restricted.admin;
    let mine = format!("{name}-mine");
    let theirs = format!("{name}-theirs");
    create(
        admin,
        &pod_manifest(&mine, "default", &name, serde_json::json!({})),
    )
    .await;
    create(
        admin,
        &pod_manifest(&theirs, "default", "someone-else", serde_json::json!({})),
    )
    .await;
    let daemon = DaemonProcess::start(
        &restricted.node_kubeconfig,
        &name,
        &attack_config(&nodepulse_testkit::attack::shortened_intervals(20)),
    )
    .await;
    wait_ready_with_lease(admin, &name).await;
    wait_pod(admin, "default", &mine, "Running", running_and_ready).await;
    // Restarted actors start from scratch (re-reading, re-registering): still only their own.
    for actor in ["node-status", "lease", "status-manager", "pod-lifecycle"] {
        daemon.kill_and_wait_restart(actor, "stop").await;
    }
    wait_ready_with_lease(admin, &name).await;

    let requests: Vec<_> = restricted
        .emulator
        .requests()
        .into_iter()
        .filter(|request| request.user == restricted.user.name)
        .collect();
    assert!(!requests.is_empty(), "the daemon used the node identity");
    let refused: Vec<_> = requests.iter().filter(|r| r.code == 403).collect();
    assert!(
        refused.is_empty(),
        "requests the node may not make: {refused:#?}"
    );
    let mut writes = BTreeSet::new();
    for request in requests.iter().filter(|r| r.verb.is_write()) {
        let target = (
            request.resource.as_str(),
            request.namespace.as_str(),
            request.name.as_str(),
        );
        // A create names no object in its path: the node-restriction admission let it
        // through (no 403 above) only for the node's own Node and Lease.
        let own = match target {
            ("nodes", "", node) => node == name || node.is_empty(),
            ("leases", "kube-node-lease", lease) => lease == name || lease.is_empty(),
            ("pods", "default", pod) => pod == mine,
            // The token of the ServiceAccount its pod runs as, for the pod's API access volume
            // (a real cluster's Node authorizer allows it for pods bound to the node only).
            ("serviceaccounts", "default", "default") => request.subresource == "token",
            ("events", _, _) => true,
            _ => false,
        };
        assert!(own, "a write beyond the node's own objects: {request:?}");
        writes.insert(format!(
            "{} {}/{}",
            request.verb.as_str(),
            request.resource,
            request.subresource
        ));
    }
    assert!(
        requests.iter().all(|r| r.name != theirs),
        "the other node's pod was never touched"
    );
    eprintln!(
        "RESTRICTED: {} requests; writes: {writes:?}",
        requests.len()
    );
}
