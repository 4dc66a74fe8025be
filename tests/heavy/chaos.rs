//! Chaos: random actors killed in random modes at random moments while the daemon runs under
//! load (API latency, pods bound to the node coming and going, the host's memory pressure
//! flipping on and off), with the emulator's node-lifecycle loop watching. Checks that the node
//! never looks dead or different (but for MemoryPressure), the Lease never lags beyond a renew
//! interval plus the slowest restart, the pods left end Running, every kill is counted and
//! logged as a restart, MemoryPressure flipped both ways, never without the host, and follows
//! the host's final state in time; and then that the restart-intensity bound escalates exactly
//! on the restart that exceeds it.
//!
//! The daemon reads a fixture host (`hostRoot`) whose `proc/meminfo` the test rewrites. Its
//! memory threshold is a soft one with an hour's grace: the condition is set at once, as the
//! kubelet does, and nothing is evicted within the run.
//!
//! The seed is printed; `NODEPULSE_CHAOS_SEED=<seed>` replays a run (kills and pressure flips)
//! and `NODEPULSE_CHAOS_SECONDS` sets its length (default 20; below about 15 s the pressure may
//! not flip both ways).

use crate::exclusive;

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use nodepulse_emulator::{FaultAction, FaultRule};
use nodepulse_supervisor::ChildState;
use nodepulse_testkit::{
    attack::{
        LIVENESS_TIMEOUT, NODE_ACTORS, RENEW_INTERVAL, STATUS_PERIOD, lifecycle_emulator,
        needs_emulator, wait_ready_with_lease,
    },
    cleanup,
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    host_fixture::HostFixture,
    observer::{NodeObserver, conditions},
    pods::{pod_manifest, running_and_ready},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use reqwest::StatusCode;
use serde_json::json;

const ACTORS: &[&str] = NODE_ACTORS;
const MODES: &[&str] = &["stop", "panic", "hang"];
/// The restart window: so long that the bound is a plain count over any run. Governor refills
/// one restart per window / bound; with a 1 h window a 2-minute run (bound 64) got three
/// restarts back and escalated three kills late.
const RESTART_WINDOW: &str = "1000h";
/// The slowest restart: a hang goes unnoticed for up to the liveness timeout (plus one ping
/// interval), then waits out the backoff (at most 1 s).
const SLOWEST_RESTART: Duration =
    Duration::from_millis(LIVENESS_TIMEOUT.as_millis() as u64 + 250 + 1000);
/// Room for a loaded machine on top of each timing bound.
const SLACK: Duration = Duration::from_secs(3);
/// `housekeepingInterval`: how often the daemon measures the (fixture) host.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// `evictionPressureTransitionPeriod`, shortened from the kubelet's 5 minutes.
const TRANSITION_PERIOD: Duration = Duration::from_secs(2);
/// The soft memory threshold (`memory.available`), and the free memory of the fixture host
/// with and without pressure: both far above the hard threshold of 1Mi.
const SOFT_THRESHOLD_MIB: u64 = 1024;
const FREE_KIB_PRESSURED: u64 = 256 * 1024;
const FREE_KIB_RELAXED: u64 = 6 * 1024 * 1024;
/// How long the host stays in one memory state: long enough that the condition shows each
/// state through the transition period, a housekeeping pass and a restarting actor.
const PRESSURE_PHASE_SECONDS: std::ops::Range<f64> = 7.0..11.0;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

#[actix_rt::test]
async fn random_kills_under_load_lose_nothing_and_escalate_exactly_past_the_bound() {
    let _alone = exclusive().await;
    let cluster = TestCluster::start_with(lifecycle_emulator()).await;
    if !needs_emulator(
        &cluster,
        "random_kills_under_load_lose_nothing_and_escalate_exactly_past_the_bound",
    ) {
        return;
    }
    let seed = env_number("NODEPULSE_CHAOS_SEED").unwrap_or_else(rand::random);
    let seconds = env_number("NODEPULSE_CHAOS_SECONDS").unwrap_or(20);
    eprintln!("chaos seed {seed} for {seconds}s (replay: NODEPULSE_CHAOS_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    // Room for a kill per actor every two seconds or so.
    let max_restarts = u32::try_from(seconds / 2 + 4).unwrap_or(u32::MAX);

    // The pressure flips, drawn up front from their own generator so that they replay exactly
    // and the kills of a seed stay those of runs before the flips existed.
    let flips = pressure_flips(seed, Duration::from_secs(seconds));
    eprintln!("chaos memory pressure flips (s after start, pressured): {flips:?}");

    let name = unique_node_name("chaos");
    let host = Arc::new(HostFixture::new(FREE_KIB_RELAXED));
    let yaml = format!(
        "nodeStatusUpdateFrequency: {status}s\nnodeStatusReportFrequency: {status}s\nnodeLeaseDurationSeconds: {lease}\nsupervision:\n  livenessTimeout: {liveness}s\n  livenessInterval: 250ms\n  maxRestarts: {max_restarts}\n  restartWindow: {RESTART_WINDOW}\n  backoff: {{initial: 100ms, max: 1s, jitter: 0.1}}\nhostRoot: {root}\nhousekeepingInterval: {housekeeping}s\nevictionSoft:\n  memory.available: {SOFT_THRESHOLD_MIB}Mi\nevictionSoftGracePeriod:\n  memory.available: 1h\nevictionPressureTransitionPeriod: {transition}s\n",
        status = STATUS_PERIOD.as_secs(),
        lease = RENEW_INTERVAL.as_secs() * 4,
        liveness = LIVENESS_TIMEOUT.as_secs(),
        root = host.root().display(),
        housekeeping = HOUSEKEEPING.as_secs(),
        transition = TRANSITION_PERIOD.as_secs(),
    );
    let mut daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config(&yaml)).await;
    wait_ready_with_lease(&cluster.client, &name).await;
    wait_memory_pressure(&cluster.client, &name, "False").await;
    let observer = NodeObserver::start_varying(&cluster.client, &name, &["MemoryPressure"]).await;
    let watching_since = Instant::now();

    // Load: API latency on a share of all requests, pods bound to the node coming and going,
    // and the debug endpoint read continuously.
    let faults = cluster.faults();
    faults.inject(FaultRule::new(FaultAction::Latency { millis: 150 }).probability(0.2));
    let churned = Arc::new(AtomicU64::new(0));
    let load = actix_rt::spawn(pod_churn(
        cluster.client.clone(),
        name.clone(),
        Arc::clone(&churned),
    ));
    let pressure = actix_rt::spawn(flip_pressure(Arc::clone(&host), flips.clone()));

    // Kills at random moments; an actor is attacked again only once its last kill has shown
    // as a restart, so each accepted kill is exactly one restart.
    let mut kills: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_mode: BTreeMap<&str, u64> = BTreeMap::new();
    let mut pending: BTreeMap<&str, u64> = BTreeMap::new(); // actor → restarts expected
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        for actor in daemon.snapshots().await {
            let name = actor.name.as_str();
            assert_ne!(
                actor.state,
                ChildState::Escalated,
                "nothing escalates in the chaos phase: {actor:?}"
            );
            if pending.get(name).is_some_and(|expected| {
                actor.state == ChildState::Running && actor.restarts == *expected
            }) {
                pending.remove(name);
            }
        }
        let idle: Vec<&str> = ACTORS
            .iter()
            .copied()
            // The last restart of the bound is kept for the escalation check below.
            .filter(|actor| !pending.contains_key(actor))
            .filter(|actor| kills.get(actor).copied().unwrap_or(0) < u64::from(max_restarts) - 1)
            .collect();
        if !idle.is_empty() {
            let actor = idle[rng.random_range(0..idle.len())];
            let mode = MODES[rng.random_range(0..MODES.len())];
            let (status, body) = daemon.kill_actor(actor, mode).await;
            assert_eq!(status, StatusCode::ACCEPTED, "kill {actor} {mode}: {body}");
            let count = kills.entry(actor).or_default();
            *count += 1;
            pending.insert(actor, *count);
            *by_mode.entry(mode).or_default() += 1;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..1500))).await;
    }
    // Let the last kills restart.
    for (actor, expected) in &pending {
        nodepulse_testkit::eventually_async(&format!("{actor} restarts"), || async {
            let state = daemon.snapshot(actor).await;
            state.state == ChildState::Running && state.restarts == *expected
        })
        .await;
    }
    tokio::time::sleep(RENEW_INTERVAL).await;
    load.abort();
    faults.clear();
    // Every flip was due before the chaos ended: this only collects when each was written.
    let written = pressure.await.expect("the pressure flips ran");
    // No pod status change was lost: the pods still bound to the node all reach Running.
    let created = churned.load(Ordering::Relaxed);
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    for index in created.saturating_sub(5)..created {
        let pod = churned_pod(&name, index);
        let deadline = Instant::now() + nodepulse_testkit::PATIENCE;
        loop {
            let seen = pods.get_opt(&pod).await.ok().flatten();
            if seen.as_ref().is_some_and(running_and_ready) {
                break;
            }
            if Instant::now() > deadline {
                let (_, status_manager) = daemon.get("/debug/actors/status-manager").await;
                let (_, lifecycle) = daemon.get("/debug/actors/pod-lifecycle").await;
                let (_, lease) = daemon.get("/debug/actors/lease").await;
                let lines = daemon.log_lines();
                let heartbeat: Vec<&String> = lines
                    .iter()
                    .filter(|line| line.contains("heartbeat") || line.contains("buffer"))
                    .collect();
                let tail = &heartbeat[heartbeat.len().saturating_sub(15)..];
                panic!(
                    "seed {seed}: {pod} never reached Running and Ready after the chaos: {:#?}\nstatus-manager: {status_manager}\npod-lifecycle: {lifecycle}\nlease: {lease}\nlast heartbeat log lines: {tail:#?}\nworst lease lag {:?}",
                    seen.map(|pod| pod.status),
                    observer.worst_lag_since(watching_since),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // MemoryPressure ends as the host does, within a housekeeping pass, the transition period
    // (when the pressure ended), a status period and a restart of an actor killed at the end.
    let (last_write, pressured) = written.last().copied().unwrap_or((watching_since, false));
    let expected = if pressured { "True" } else { "False" };
    nodepulse_testkit::eventually(
        &format!("the observer sees MemoryPressure {expected}"),
        || observer.varying_status("MemoryPressure").as_deref() == Some(expected),
    )
    .await;
    let observed = observer.flips_since("MemoryPressure", watching_since);
    let followed = observed
        .iter()
        .rev()
        .find(|(at, _)| *at >= last_write)
        .map_or(Duration::ZERO, |(at, _)| at.duration_since(last_write));
    let follow_bound = HOUSEKEEPING
        + if pressured {
            Duration::ZERO
        } else {
            TRANSITION_PERIOD
        }
        + STATUS_PERIOD
        + SLOWEST_RESTART
        + SLACK;
    let observed_on = observed.iter().filter(|(_, to)| to == "True").count();
    let observed_off = observed.iter().filter(|(_, to)| to == "False").count();
    let written_on = written.iter().filter(|(_, on)| *on).count();
    let written_off = written.len() - written_on;
    // How long each flip of the host took to show (none: merged into its neighbours).
    let shown: Vec<String> = written
        .iter()
        .map(|(at, on)| {
            let status = if *on { "True" } else { "False" };
            observed
                .iter()
                .find(|(seen, to)| seen >= at && to == status)
                .map_or_else(
                    || "none".to_owned(),
                    |(seen, _)| format!("{:.2}s", seen.duration_since(*at).as_secs_f64()),
                )
        })
        .collect();

    let worst_lag = observer.worst_lag_since(watching_since);
    let total: u64 = kills.values().sum();
    eprintln!(
        "CHAOS seed {seed}: {total} kills {kills:?} by mode {by_mode:?}; {} pods churned; worst lease lag {:.2}s; polls {:?}; MemoryPressure flips seen {observed_on} on / {observed_off} off of {written_on} / {written_off} written (each shown after {shown:?}), final {expected} followed in {:.2}s",
        churned.load(Ordering::Relaxed),
        worst_lag.as_secs_f64(),
        observer.polls(),
        followed.as_secs_f64(),
    );
    assert!(
        observed.len() == observed_on + observed_off,
        "seed {seed}: MemoryPressure was neither True nor False: {observed:?}"
    );
    assert!(
        (written_on == 0 || observed_on >= 1) && (written_off == 0 || observed_off >= 1),
        "seed {seed}: MemoryPressure did not flip each way the host did: seen {observed_on} on / {observed_off} off of {written_on} / {written_off}"
    );
    assert!(
        observed_on <= written_on && observed_off <= written_off,
        "seed {seed}: MemoryPressure flipped without the host: seen {observed:?} of {written:?}"
    );
    assert!(
        followed <= follow_bound,
        "seed {seed}: MemoryPressure took {followed:?} to follow the host's last flip (bound {follow_bound:?})"
    );
    assert!(total > 0, "the chaos killed something");
    assert!(
        churned.load(Ordering::Relaxed) > 0,
        "the pod churn loaded the API"
    );
    let wrong = observer.wrong_since(watching_since);
    assert!(
        wrong.is_empty(),
        "seed {seed}: the node looked wrong: {wrong:#?}"
    );
    assert!(
        worst_lag <= RENEW_INTERVAL + SLOWEST_RESTART + SLACK,
        "seed {seed}: the Lease lagged {worst_lag:?}"
    );
    for &actor in ACTORS {
        let expected = kills.get(actor).copied().unwrap_or(0);
        assert_eq!(
            daemon.snapshot(actor).await.restarts,
            expected,
            "seed {seed}: {actor}'s restarts are its kills"
        );
        let logged = daemon
            .events("actor ended; restarting after backoff")
            .into_iter()
            .filter(|event| event["actor"] == actor)
            .count() as u64;
        assert_eq!(
            logged, expected,
            "seed {seed}: {actor}'s restarts were logged"
        );
    }

    // The bound: one actor is killed up to its last admitted restart, which still restarts,
    // and once more, which escalates: the daemon exits with code 3 naming it.
    let victim = ACTORS[rng.random_range(0..ACTORS.len())];
    let done = kills.get(victim).copied().unwrap_or(0);
    for _ in done..u64::from(max_restarts) {
        daemon.kill_and_wait_restart(victim, "stop").await;
    }
    let (status, body) = daemon.kill_actor(victim, "stop").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let code = daemon.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(code, Some(3), "seed {seed}: escalation exits with code 3");
    let escalated = daemon
        .log_lines()
        .into_iter()
        .rev()
        .find(|line| line.starts_with("nodepulse: supervisor escalated"))
        .unwrap_or_default();
    assert!(
        escalated.contains(&format!("actor \"{victim}\""))
            && escalated.contains(&format!("({max_restarts} restarts within")),
        "seed {seed}: {escalated}"
    );
}

/// Creates pods bound to `node` and deletes them again (each lives for five more), one every
/// 200 ms, until aborted; counts the pods created.
async fn pod_churn(client: kube::Client, node: String, created: Arc<AtomicU64>) {
    let pods = Api::<Pod>::namespaced(client, "default");
    let mut next = 0u64;
    loop {
        let pod = pod_manifest(&churned_pod(&node, next), "default", &node, json!({}));
        cleanup::own(cleanup::Owned::Pod {
            namespace: "default".to_owned(),
            name: churned_pod(&node, next),
        });
        if pods.create(&PostParams::default(), &pod).await.is_ok() {
            created.fetch_add(1, Ordering::Relaxed);
        }
        if next >= 5 {
            let _ = pods
                .delete(&churned_pod(&node, next - 5), &DeleteParams::default())
                .await;
        }
        next += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// When the host's memory pressure flips within a run of `length`, and to what: first within
/// three seconds, then after phases of [`PRESSURE_PHASE_SECONDS`], alternating on and off from
/// off (so a 20 s run flips on and off at least; a 30 s one on, off and on). Drawn from `seed` alone.
fn pressure_flips(seed: u64, length: Duration) -> Vec<(Duration, bool)> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d65_6d6f_7279); // "memory"
    let mut at = Duration::from_secs_f64(rng.random_range(1.0..3.0));
    let mut pressured = false;
    let mut flips = Vec::new();
    while at < length {
        pressured = !pressured;
        flips.push((at, pressured));
        at += Duration::from_secs_f64(rng.random_range(PRESSURE_PHASE_SECONDS));
    }
    flips
}

/// Rewrites the host's `proc/meminfo` at each flip's moment after now; returns when each was
/// written.
async fn flip_pressure(
    host: Arc<HostFixture>,
    flips: Vec<(Duration, bool)>,
) -> Vec<(Instant, bool)> {
    let start = tokio::time::Instant::now();
    let mut written = Vec::with_capacity(flips.len());
    for (at, pressured) in flips {
        tokio::time::sleep_until(start + at).await;
        host.set_free_memory(if pressured {
            FREE_KIB_PRESSURED
        } else {
            FREE_KIB_RELAXED
        });
        written.push((Instant::now(), pressured));
    }
    written
}

/// Waits until the Node's MemoryPressure is `status`.
async fn wait_memory_pressure(client: &kube::Client, name: &str, status: &str) {
    let nodes = Api::<Node>::all(client.clone());
    nodepulse_testkit::eventually_async(&format!("MemoryPressure is {status}"), || async {
        nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| {
                conditions(&node).get("MemoryPressure").map(String::as_str) == Some(status)
            })
    })
    .await;
}

fn churned_pod(node: &str, index: u64) -> String {
    format!("{node}-churn-{index}")
}
