//! Every actor of a running daemon killed in every mode through the debug endpoint, with the
//! emulator's node-lifecycle loop watching: each kill is followed by a restart that the debug
//! endpoint counts and the log records, the Lease never lags by more than one renew interval
//! plus the restart time, the node never goes Unknown or looks different, and a fresh status
//! with the right conditions is posted within one status period of the restart.

use std::time::{Duration, Instant};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::Api;
use nodepulse_testkit::{
    attack::{
        NODE_ACTORS, RENEW_INTERVAL, STATUS_PERIOD, lifecycle_emulator, needs_emulator,
        ready_daemon, ready_heartbeat,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::DaemonProcess,
    eventually_async,
    observer::{NodeObserver, conditions},
    pods::{create, pod_manifest, running_and_ready, wait_pod},
};

const ACTORS: &[&str] = NODE_ACTORS;
const MODES: &[&str] = &["stop", "panic", "hang"];

/// Room for a loaded CI machine on top of each timing bound (polling, scheduling, API latency).
const SLACK: Duration = Duration::from_secs(3);

/// One kill and what it cost.
struct Attack {
    actor: &'static str,
    mode: &'static str,
    restart: Duration,
    worst_lag: Duration,
    status_after_restart: Duration,
}

#[actix_rt::test]
async fn every_actor_killed_in_every_mode_restarts_and_the_node_stays_ready() {
    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(
        &cluster,
        "every_actor_killed_in_every_mode_restarts_and_the_node_stays_ready",
    ) {
        return;
    }
    let name = unique_node_name("actor-faults");
    let kills_per_actor = MODES.len();
    let daemon = ready_daemon(
        &cluster,
        &name,
        u32::try_from(kills_per_actor + 2).expect("small"),
    )
    .await;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let watching_since = Instant::now();

    // A pod bound to the node just before each kill: its statuses (Pending, then Running)
    // are being decided and sent while the actors fall.
    let mut pods = Vec::new();
    let mut attacks = Vec::new();
    for &actor in ACTORS {
        for &mode in MODES {
            let pod = format!("{name}-{actor}-{mode}");
            create(
                &cluster.client,
                &pod_manifest(&pod, "default", &name, serde_json::json!({})),
            )
            .await;
            pods.push(pod);
            attacks.push(attack(&cluster, &daemon, &observer, &name, actor, mode).await);
        }
    }
    // No pod status change was lost: every pod made it to Running and Ready in the API.
    for pod in &pods {
        wait_pod(
            &cluster.client,
            "default",
            pod,
            "Running and Ready",
            running_and_ready,
        )
        .await;
    }

    for attack in &attacks {
        eprintln!(
            "FAULT kill {:<16} {:<5} restart {:>6.2}s  worst lease lag {:>5.2}s  fresh status {:>5.2}s after restart",
            attack.actor,
            attack.mode,
            attack.restart.as_secs_f64(),
            attack.worst_lag.as_secs_f64(),
            attack.status_after_restart.as_secs_f64(),
        );
    }
    let wrong = observer.wrong_since(watching_since);
    assert!(
        wrong.is_empty(),
        "the node looked wrong during the attack: {wrong:#?}"
    );
    let (polls, failed) = observer.polls();
    assert!(
        polls > 50 && failed * 10 < polls,
        "the node was watched: {polls} polls, {failed} failed"
    );

    // Every restart is counted by the endpoint and was logged with its actor and reason.
    for &actor in ACTORS {
        let restarts = daemon.snapshot(actor).await.restarts;
        assert_eq!(restarts, kills_per_actor as u64, "{actor}");
        let logged: Vec<_> = daemon
            .events("actor ended; restarting after backoff")
            .into_iter()
            .filter(|event| event["actor"] == actor)
            .collect();
        assert_eq!(logged.len(), kills_per_actor, "{actor}: {logged:#?}");
        let kills = daemon
            .events("killing actor instance on request (fault injection)")
            .into_iter()
            .filter(|event| event["span"]["actor"] == actor)
            .count();
        assert_eq!(kills, kills_per_actor, "{actor}: every kill was logged");
    }
    assert_eq!(
        conditions(
            &Api::<Node>::all(cluster.client.clone())
                .get(&name)
                .await
                .expect("node")
        ),
        observer.baseline
    );
}

/// Kills `actor` in `mode`, waits for its restart and a fresh status, and checks the Lease lag.
async fn attack(
    cluster: &TestCluster,
    daemon: &DaemonProcess,
    observer: &NodeObserver,
    name: &str,
    actor: &'static str,
    mode: &'static str,
) -> Attack {
    // A fresh status after the kill: a Ready heartbeat (whole seconds) later than both the
    // one there before and the second of the kill, so a killed node-status cannot have sent it.
    let heartbeat_before = ready_heartbeat(&cluster.client, name).await;
    let killed_second = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).ok();
    let heartbeat_before = heartbeat_before.max(killed_second);
    let killed_at = Instant::now();
    let restart = daemon.kill_and_wait_restart(actor, mode).await;
    let restarted_at = Instant::now();
    let restarted_wall = std::time::SystemTime::now();
    let nodes = Api::<Node>::all(cluster.client.clone());
    eventually_async(
        &format!("a fresh status after {actor} was killed ({mode})"),
        || async {
            let Some(node) = nodes.get_opt(name).await.ok().flatten() else {
                return false;
            };
            let fresh = ready_heartbeat(&cluster.client, name).await > heartbeat_before;
            fresh && conditions(&node) == observer.baseline
        },
    )
    .await;
    let status_after_restart = restarted_at.elapsed();
    // With the conditions the node had all along, within one period of the restart (plus a
    // second of rounding, plus slack).
    assert!(
        status_after_restart <= STATUS_PERIOD + Duration::from_secs(1) + SLACK,
        "{actor} ({mode}): the first fresh status came {status_after_restart:?} after the restart"
    );
    // Wait for a renewal made after the restart: the lag recorded then covers the whole
    // disturbance (it only grows until a renewal lands).
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    eventually_async(&format!("a renewal after {actor} restarted"), || async {
        leases
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.renew_time)
            .is_some_and(|renewed| std::time::SystemTime::from(renewed.0) > restarted_wall)
    })
    .await;
    // And one more poll of the observer after it, so the worst lag includes the renewal.
    let renewal_seen = Instant::now();
    nodepulse_testkit::eventually("the observer polled the renewed Lease", || {
        observer.lease_polls_since(renewal_seen) > 0
    })
    .await;
    let worst_lag = observer.worst_lag_since(killed_at);
    assert!(
        observer.lease_polls_since(killed_at) > 0,
        "the Lease was watched"
    );
    assert!(
        worst_lag <= RENEW_INTERVAL + restart + SLACK,
        "{actor} ({mode}): the Lease lagged {worst_lag:?} (renew interval {RENEW_INTERVAL:?}, restart {restart:?})"
    );
    Attack {
        actor,
        mode,
        restart,
        worst_lag,
        status_after_restart,
    }
}

/// The heartbeat client is rebuilt by whichever actor sees heartbeats fail repeatedly (here the
/// Lease, after two failed renewals). Killing that actor with `hang` afterwards must not take
/// the rebuilt client down with the actor's thread: renewals, status and pod statuses go on.
#[actix_rt::test]
async fn a_hung_lease_that_rebuilt_the_heartbeat_client_leaves_it_working() {
    use nodepulse_emulator::{FaultAction, FaultRule, Verb};
    use nodepulse_testkit::daemon::logged;

    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(
        &cluster,
        "a_hung_lease_that_rebuilt_the_heartbeat_client_leaves_it_working",
    ) {
        return;
    }
    let name = unique_node_name("rebuilt-client");
    let daemon = ready_daemon(&cluster, &name, 10).await;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let faults = cluster.faults().clone();
    faults.inject(
        FaultRule::new(FaultAction::Error {
            code: 500,
            message: None,
        })
        .resource("leases")
        .verb(Verb::Patch)
        .times(2),
    );
    logged(
        &daemon,
        "heartbeat failed repeatedly; its connections were reset",
    )
    .await;
    let killed_at = Instant::now();
    let restart = daemon.kill_and_wait_restart("lease", "hang").await;
    let restarted_wall = std::time::SystemTime::now();
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    eventually_async("a renewal after the hung Lease restarted", || async {
        leases
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.renew_time)
            .is_some_and(|renewed| std::time::SystemTime::from(renewed.0) > restarted_wall)
    })
    .await;
    let pod = format!("{name}-after");
    create(
        &cluster.client,
        &pod_manifest(&pod, "default", &name, serde_json::json!({})),
    )
    .await;
    wait_pod(
        &cluster.client,
        "default",
        &pod,
        "Running",
        running_and_ready,
    )
    .await;
    let worst_lag = observer.worst_lag_since(killed_at);
    eprintln!("REBUILT CLIENT: lease hang restart {restart:?}, worst lease lag {worst_lag:?}");
    assert!(
        worst_lag <= RENEW_INTERVAL + restart + SLACK,
        "the Lease lagged {worst_lag:?}"
    );
    let wrong = observer.wrong_since(killed_at);
    assert!(wrong.is_empty(), "the node looked wrong: {wrong:#?}");
}

/// Like the test above, with NodeStatus rebuilding the client and then hanging, and a fresh
/// Lease instance (nothing cached: it must GET its Lease first) started after that.
///
/// Found by the 2-minute chaos run: `KubeApi::reset_heartbeat_connections` built the new kube
/// client (and spawned its tower Buffer worker) on the calling actor's arbiter; when that actor
/// was killed with `hang` the supervisor retired and then stopped the arbiter, the worker died,
/// and every heartbeat request after that failed with "buffer's worker closed unexpectedly". A
/// Lease instance in its ensure loop never resets the client, so it never renewed again and the
/// node went Unknown. The replacement is now built on the runtime `connect` ran on.
#[actix_rt::test]
async fn a_fresh_lease_after_a_hung_node_status_rebuilt_the_client_still_renews() {
    use nodepulse_emulator::{FaultAction, FaultRule, Verb};
    use nodepulse_testkit::daemon::logged;

    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(
        &cluster,
        "a_fresh_lease_after_a_hung_node_status_rebuilt_the_client_still_renews",
    ) {
        return;
    }
    let name = unique_node_name("rebuilt-by-status");
    let daemon = ready_daemon(&cluster, &name, 10).await;
    let faults = cluster.faults().clone();
    faults.inject(
        FaultRule::new(FaultAction::Error {
            code: 500,
            message: None,
        })
        .resource("nodes")
        .subresource("status")
        .verb(Verb::Patch)
        .times(2),
    );
    logged(
        &daemon,
        "heartbeat failed repeatedly; its connections were reset",
    )
    .await;
    let rebuilt_by = daemon.events("heartbeat failed repeatedly; its connections were reset")[0]
        ["span"]["actor"]
        .clone();
    daemon.kill_and_wait_restart("node-status", "hang").await;
    // The hung instance's arbiter — the thread the client was rebuilt on — is stopped now.
    logged(&daemon, "retired arbiter stopped: its last instance ended").await;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let killed_at = Instant::now();
    let restart = daemon.kill_and_wait_restart("lease", "stop").await;
    let restarted_wall = std::time::SystemTime::now();
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    let deadline = Instant::now() + nodepulse_testkit::PATIENCE;
    loop {
        let renewed = leases
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.renew_time)
            .is_some_and(|renewed| std::time::SystemTime::from(renewed.0) > restarted_wall);
        if renewed {
            break;
        }
        if Instant::now() > deadline {
            let closed = daemon
                .log_lines()
                .iter()
                .filter(|line| line.contains("buffer's worker closed unexpectedly"))
                .count();
            panic!(
                "no renewal by the fresh Lease instance within {:?} (the client was rebuilt by {rebuilt_by}; {closed} log lines say \"buffer's worker closed unexpectedly\"): {}",
                nodepulse_testkit::PATIENCE,
                daemon.actor("lease").await["actorState"]
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let worst_lag = observer.worst_lag_since(killed_at);
    eprintln!("REBUILT BY {rebuilt_by}: worst lease lag {worst_lag:?}");
    assert!(
        worst_lag <= RENEW_INTERVAL + restart + SLACK,
        "the Lease lagged {worst_lag:?}"
    );
}
