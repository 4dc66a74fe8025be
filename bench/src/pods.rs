//! A fleet with pods: `nodepulse --nodes N` as its own process (this build's daemon or another,
//! for A/B runs) against the emulator in another, its requests counted by the proxy. P pods
//! bound across the nodes at once → all Running in the API; over a steady window the fleet's
//! requests by verb and resource, CPU and resident memory against before the pods; all deleted
//! → all gone, and the memory left after.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use nodepulse::{apiserver_client::node::is_ready, config::generated_name, fleet::measure::Spread};
use serde_json::{Value, json};

use crate::{
    pod_watch::PodWatch,
    processes::{Running, daemon_binary, free_port, start_emulator},
    procfs::{self, Usage},
    proxy::{self, Traffic},
    single::client,
};

const NODE_BASE: &str = "pods";
const NAMESPACE: &str = "default";
const SELECTOR: &str = "bench=pods";
/// Creates and deletes in flight at once, as a controller's workers would send them.
const IN_FLIGHT: usize = 32;
/// Give up on all Ready, all Running or all gone after this long.
pub const PATIENCE: Duration = Duration::from_secs(900);

/// How a pods run is sized.
#[derive(Debug, Clone)]
pub struct PodsRun {
    pub nodes: usize,
    pub pods: usize,
    /// Wait after all nodes are Ready and after all pods are gone before reading memory: at
    /// least the daemon's heap-trim period, so what is read is what is kept.
    pub settle: Duration,
    /// Wait after all pods are Running before the steady window.
    pub warmup: Duration,
    pub steady: Duration,
    pub daemon: Option<PathBuf>,
}

fn pod(index: usize, nodes: usize) -> Result<Pod, String> {
    serde_json::from_value(json!({
        "metadata": {"name": format!("bench-pod-{index}"), "namespace": NAMESPACE,
                     "labels": {"bench": "pods"}},
        "spec": {"nodeName": generated_name(NODE_BASE, index % nodes),
                 "containers": [{"name": "app", "image": "pause"}]},
    }))
    .map_err(|error| error.to_string())
}

/// Polls `done` every `every` until it holds; how long that took.
pub async fn until(
    what: &str,
    every: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<f64, String> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > PATIENCE {
            return Err(format!("{what}: not within {PATIENCE:?}"));
        }
        tokio::time::sleep(every).await;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// A watch of the pods `selector` picks, once its first list is in.
pub async fn synced_watch(pods: Api<Pod>, selector: &str) -> Result<PodWatch, String> {
    let watch = PodWatch::start(pods, selector);
    until(
        "the pod watch's first list",
        Duration::from_millis(10),
        || watch.with(|seen| seen.synced()),
    )
    .await?;
    Ok(watch)
}

async fn all_nodes_ready(nodes: &Api<Node>, count: usize) -> Result<f64, String> {
    let started = Instant::now();
    loop {
        let listed = nodes.list(&ListParams::default()).await;
        if listed.is_ok_and(|list| list.items.iter().filter(|node| is_ready(node)).count() >= count)
        {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("{count} nodes were not Ready within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `request` for every pod index, `IN_FLIGHT` at a time; the first error ends it.
pub async fn for_each_pod<F, R>(count: usize, request: F) -> Result<(), String>
where
    F: Fn(usize) -> R,
    R: Future<Output = Result<(), String>>,
{
    let mut requests = stream::iter(0..count)
        .map(request)
        .buffer_unordered(IN_FLIGHT);
    while let Some(outcome) = requests.next().await {
        outcome?;
    }
    Ok(())
}

/// Sends `request` until it is answered: a connection the emulator dropped or a request it
/// timed out under the load (408, 429, 5xx: what client-go retries too) is tried again (at most
/// `ATTEMPTS` times), and the answer `done_already` (the retried request had landed after all)
/// counts as done.
pub async fn answered<F, R>(what: String, done_already: u16, request: F) -> Result<(), String>
where
    F: Fn() -> R,
    R: Future<Output = Result<(), kube::Error>>,
{
    const ATTEMPTS: u32 = 5;
    let mut attempt = 1;
    loop {
        match request().await {
            Ok(()) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == done_already && attempt > 1 => {
                return Ok(());
            }
            Err(error @ kube::Error::Api(_)) if !transient(&error) => {
                return Err(format!("{what}: {error}"));
            }
            Err(error) if attempt == ATTEMPTS => {
                return Err(format!("{what}: {error} ({ATTEMPTS} attempts)"));
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100) * attempt).await;
                attempt += 1;
            }
        }
    }
}

/// Deletes the pods `name(0..count)`, `IN_FLIGHT` at a time, and waits until `watch` shows
/// none left.
pub async fn delete_all(
    pods: &Api<Pod>,
    count: usize,
    name: impl Fn(usize) -> String,
    watch: &PodWatch,
) -> Result<(), String> {
    for_each_pod(count, |index| {
        let (pods, name) = (pods.clone(), name(index));
        async move {
            answered(format!("deleting pod {index}"), 404, || {
                let (pods, name) = (pods.clone(), name.clone());
                async move { pods.delete(&name, &DeleteParams::default()).await.map(drop) }
            })
            .await
        }
    })
    .await?;
    until("every pod gone", Duration::from_millis(10), || {
        watch.with(|seen| seen.present() == 0)
    })
    .await
    .map(drop)
}

/// An API answer that says "not now" rather than "no".
fn transient(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if matches!(status.code, 408 | 429 | 500 | 502 | 503 | 504))
}

pub fn spread(seconds: Vec<f64>) -> Value {
    let spread = Spread::of(seconds);
    json!({"count": spread.count, "p50": spread.p50_seconds, "p99": spread.p99_seconds,
           "last": spread.max_seconds})
}

/// The steady window's requests, by `"<VERB> <resource>"` and in the groups the goal names.
fn requests(wire: &Traffic, seconds: f64) -> Value {
    let count = |pick: &dyn Fn(&str, &str) -> bool| -> u64 {
        wire.requests
            .iter()
            .filter(|(kind, _)| {
                let (verb, resource) = kind.split_once(' ').unwrap_or((kind, ""));
                pick(verb, resource)
            })
            .map(|(_, count)| count)
            .sum()
    };
    let pod_gets = count(&|verb, resource| verb == "GET" && resource == "pods");
    let status_patches = count(&|verb, resource| verb == "PATCH" && resource == "pods/status");
    let event_writes =
        count(&|verb, resource| resource == "events" && verb != "GET" && verb != "WATCH");
    let lease_renewals = count(&|verb, resource| resource == "leases" && verb != "GET");
    let total: u64 = wire.requests.values().sum();
    let by_kind: BTreeMap<&String, &u64> = wire.requests.iter().collect();
    json!({
        "byKind": by_kind,
        "total": total,
        "perSecond": total as f64 / seconds,
        "podGets": pod_gets,
        "podStatusPatches": status_patches,
        "eventWrites": event_writes,
        "leaseRenewals": lease_renewals,
        "other": total - pod_gets - status_patches - event_writes - lease_renewals,
    })
}

/// Each phase's figures on stderr as it ends: a run stopped early (the storm of a build before
/// issue 29 takes hours to delete 10,000 pods) keeps what it measured.
fn progress(phase: &str, figures: &Value) {
    eprintln!("{}", json!({ "phase": phase, "figures": figures }));
}

pub fn memory(usage: &Usage) -> Value {
    json!({"rssBytes": usage.rss_bytes, "anonBytes": usage.anon_bytes})
}

fn kib_per_pod(now: u64, before: u64, pods: usize) -> f64 {
    (now as f64 - before as f64) / 1024.0 / pods.max(1) as f64
}

fn fleet_config(scratch: &Path) -> Result<PathBuf, String> {
    let root = scratch.join("root");
    std::fs::create_dir_all(&root).map_err(|error| format!("{}: {error}", root.display()))?;
    let debug_port = free_port().map_err(|error| error.to_string())?;
    let config = scratch.join("pods-fleet.yaml");
    let yaml = format!(
        "runtime: simulated\nrootDir: {}\nevictionHard:\n  memory.available: 1Mi\n\
         debug:\n  address: 127.0.0.1:{debug_port}\n",
        root.display()
    );
    std::fs::write(&config, yaml).map_err(|error| format!("{}: {error}", config.display()))?;
    Ok(config)
}

pub async fn run(run: &PodsRun, scratch: &Path) -> Result<Value, String> {
    let binary = daemon_binary(run.daemon.as_deref())?;
    let (_emulator, api_address) = start_emulator()?;
    let (proxy_address, traffic) = proxy::start(api_address)
        .await
        .map_err(|error| error.to_string())?;
    let kubeconfig = scratch.join("pods-fleet.kubeconfig");
    std::fs::write(
        &kubeconfig,
        nodepulse_emulator::kubeconfig::render(&format!("http://{proxy_address}"), None),
    )
    .map_err(|error| error.to_string())?;
    let config = fleet_config(scratch)?;
    // The bench's own requests go straight to the emulator: the proxy counts the fleet's only.
    let client = client(&format!("http://{api_address}")).await?;
    let fleet = Running::spawn(
        &binary,
        &[
            "--config".into(),
            config.display().to_string(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--node-name".into(),
            NODE_BASE.into(),
            "--nodes".into(),
            run.nodes.to_string(),
        ],
    )?;
    let pid = fleet.pid();
    let read = || procfs::usage(pid).map_err(|error| format!("the fleet process: {error}"));
    let nodes_ready = all_nodes_ready(&Api::all(client.clone()), run.nodes).await?;
    tokio::time::sleep(run.settle).await;
    let before = read()?;
    progress(
        "nodes ready",
        &json!({"nodesReadySeconds": nodes_ready, "memory": memory(&before)}),
    );

    let pods = Api::<Pod>::namespaced(client, NAMESPACE);
    let watch = synced_watch(pods.clone(), SELECTOR).await?;
    let bound = Instant::now();
    let post = PostParams::default();
    for_each_pod(run.pods, |index| {
        let (pods, post) = (pods.clone(), post.clone());
        async move {
            let manifest = pod(index, run.nodes)?;
            answered(format!("creating pod {index}"), 409, || {
                let (pods, post, manifest) = (pods.clone(), post.clone(), manifest.clone());
                async move { pods.create(&post, &manifest).await.map(drop) }
            })
            .await
        }
    })
    .await?;
    let created = bound.elapsed().as_secs_f64();
    until("every pod Running", Duration::from_millis(20), || {
        watch.with(|seen| seen.running() >= run.pods)
    })
    .await?;
    let running = watch.with(|seen| seen.running_after(bound));
    let cpu_to_running = read()?.cpu_seconds - before.cpu_seconds;
    let running = spread(running);
    progress(
        "all running",
        &json!({"createSeconds": created, "boundToRunningSeconds": running}),
    );

    tokio::time::sleep(run.warmup).await;
    let (steady_start, wire_start) = (read()?, snapshot(&traffic)?);
    let window = Instant::now();
    tokio::time::sleep(run.steady).await;
    let seconds = window.elapsed().as_secs_f64();
    let with_pods = read()?;
    let wire = snapshot(&traffic)?.since(&wire_start);
    let steady = json!({
        "windowSeconds": seconds,
        "requests": requests(&wire, seconds),
        "cpuCores": (with_pods.cpu_seconds - steady_start.cpu_seconds) / seconds,
        "memory": memory(&with_pods),
    });
    progress("steady", &steady);

    let deleted = Instant::now();
    delete_all(
        &pods,
        run.pods,
        |index| format!("bench-pod-{index}"),
        &watch,
    )
    .await?;
    let gone = watch.with(|seen| seen.gone_after(deleted));
    tokio::time::sleep(run.settle).await;
    let after = read()?;

    Ok(json!({
        "binary": binary.display().to_string(),
        "nodes": run.nodes,
        "pods": run.pods,
        "config": {
            "settleSeconds": run.settle.as_secs_f64(),
            "warmupSeconds": run.warmup.as_secs_f64(),
            "requestsInFlight": IN_FLIGHT,
        },
        "nodesReadySeconds": nodes_ready,
        "createSeconds": created,
        "boundToRunningSeconds": running,
        "cpuSecondsToRunning": cpu_to_running,
        "steady": steady,
        "memory": {
            "beforePods": memory(&before),
            "withPods": memory(&with_pods),
            "afterDelete": memory(&after),
            "kibPerPod": kib_per_pod(with_pods.rss_bytes, before.rss_bytes, run.pods),
            "kibPerPodKeptAfterDelete": kib_per_pod(after.rss_bytes, before.rss_bytes, run.pods),
        },
        "deletedToGoneSeconds": spread(gone),
        "threads": with_pods.threads,
    }))
}

fn snapshot(traffic: &proxy::Counter) -> Result<Traffic, String> {
    Ok(traffic.lock().map_err(|error| error.to_string())?.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_requests_are_grouped_as_the_goal_names_them() {
        let wire = Traffic {
            requests: [
                ("PATCH leases", 100),
                ("GET pods", 7),
                ("PATCH pods/status", 5),
                ("POST events", 3),
                ("PATCH events", 2),
                ("WATCH pods", 1),
                ("PATCH nodes/status", 4),
            ]
            .into_iter()
            .map(|(kind, count)| (kind.to_owned(), count))
            .collect(),
            ..Traffic::default()
        };
        let grouped = requests(&wire, 2.0);
        assert_eq!(grouped["total"], 122);
        assert_eq!(grouped["perSecond"], 61.0);
        assert_eq!(
            [
                &grouped["leaseRenewals"],
                &grouped["podGets"],
                &grouped["podStatusPatches"],
                &grouped["eventWrites"],
                &grouped["other"],
            ],
            [&json!(100), &json!(7), &json!(5), &json!(5), &json!(5)]
        );
        assert_eq!(grouped["byKind"]["PATCH nodes/status"], 4);
    }
}
