//! A node agent that is already running (nodepulse or the real kubelet, on a real API server and
//! a real container runtime), measured from outside: P pods (busybox `sleep`, image present,
//! bound by `nodeName`) created at once → all Running in the API, each timed from its own
//! create; the agent's CPU and resident memory with them running over a steady window (from
//! `/proc/<pid>`); all deleted → all gone. `bench/agents.sh` brings each agent up with the
//! conformance kit's scripts and runs this for both, alternating.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use nodepulse::apiserver_client::node::is_ready;
use serde_json::{Value, json};

use crate::{
    pods::{PATIENCE, answered, delete_all, for_each_pod, memory, spread, synced_watch, until},
    procfs::{self, Usage},
};

const NAMESPACE: &str = "default";
const SELECTOR: &str = "bench=agents";
/// Stays alive until SIGTERM, then exits at once: as PID 1 of its container a bare `sleep`
/// ignores SIGTERM, and deleting would time the grace period (30 s) instead of the agent.
pub const UNTIL_TERM: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

/// What to measure and against what (the `agents` mode's arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct AgentsRun {
    /// An admin's kubeconfig for the cluster the agent's node is in.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The agent's Node.
    #[arg(long)]
    pub node: String,
    /// The agent's process ID.
    #[arg(long)]
    pub pid: u32,
    /// The container runtime's process ID (containerd), measured beside the agent.
    #[arg(long)]
    pub runtime_pid: Option<u32>,
    /// The agent's name in the results (`nodepulse`, `kubelet`).
    #[arg(long)]
    pub agent: String,
    /// The round of an A/B/A/B session.
    #[arg(long, default_value_t = 1)]
    pub round: u32,
    /// Pod counts, comma-separated, one run each, in this order.
    #[arg(long, value_delimiter = ',', default_value = "30,100", value_parser = crate::at_least_one)]
    pub pods: Vec<usize>,
    /// The pods' image; it must be present on the node (nothing is pulled).
    #[arg(
        long,
        default_value = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
    )]
    pub image: String,
    /// Wait before each size (after the node is Ready and between sizes), so the agent is at
    /// rest when the pods come.
    #[arg(long, default_value_t = 10)]
    pub settle_seconds: u64,
    /// Wait after all Running before the steady window.
    #[arg(long, default_value_t = 5)]
    pub warmup_seconds: u64,
    #[arg(long, default_value_t = 60)]
    pub steady_seconds: u64,
}

fn pod(index: usize, node: &str, image: &str) -> Result<Pod, String> {
    serde_json::from_value(json!({
        "metadata": {"name": pod_name(index), "namespace": NAMESPACE,
                     "labels": {"bench": "agents"}},
        "spec": {"nodeName": node,
                 "containers": [{"name": "sleep", "image": image,
                                 "command": ["/bin/sh", "-c", UNTIL_TERM]}]},
    }))
    .map_err(|error| error.to_string())
}

fn pod_name(index: usize) -> String {
    format!("agents-pod-{index}")
}

pub async fn client(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)
        .map_err(|error| format!("{}: {error}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|error| error.to_string())?;
    kube::Client::try_from(config).map_err(|error| error.to_string())
}

async fn node_ready(nodes: &Api<Node>, name: &str) -> Result<f64, String> {
    let started = Instant::now();
    loop {
        if nodes
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| is_ready(&node))
        {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("node {name} was not Ready within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// CPU cores used between two readings `seconds` apart.
fn cores(from: &Usage, to: &Usage, seconds: f64) -> f64 {
    (to.cpu_seconds - from.cpu_seconds) / seconds
}

struct Process {
    what: &'static str,
    pid: u32,
}

impl Process {
    fn read(&self) -> Result<Usage, String> {
        procfs::usage(self.pid)
            .map_err(|error| format!("the {} (pid {}): {error}", self.what, self.pid))
    }
}

/// One size: create, all Running, steady window, delete, all gone.
async fn one(run: &AgentsRun, count: usize, client: &kube::Client) -> Result<Value, String> {
    let agent = Process {
        what: "agent",
        pid: run.pid,
    };
    let runtime = run.runtime_pid.map(|pid| Process {
        what: "runtime",
        pid,
    });
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let watch = synced_watch(pods.clone(), SELECTOR).await?;
    let leftover = watch.with(|seen| seen.present());
    if leftover > 0 {
        return Err(format!(
            "{leftover} pods labelled {SELECTOR} exist already in {NAMESPACE}: delete them first"
        ));
    }
    let at_rest = agent.read()?;
    let runtime_at_rest = runtime.as_ref().map(Process::read).transpose()?;
    let machine_at_rest = procfs::machine_busy_seconds().map_err(|e| e.to_string())?;

    let created = Arc::new(Mutex::new(HashMap::with_capacity(count)));
    let post = PostParams::default();
    let first = Instant::now();
    for_each_pod(count, |index| {
        let (pods, post, created) = (pods.clone(), post.clone(), Arc::clone(&created));
        async move {
            let manifest = pod(index, &run.node, &run.image)?;
            answered(format!("creating pod {index}"), 409, || {
                let (pods, post, manifest) = (pods.clone(), post.clone(), manifest.clone());
                async move { pods.create(&post, &manifest).await.map(drop) }
            })
            .await?;
            created
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(pod_name(index), Instant::now());
            Ok(())
        }
    })
    .await?;
    let create_seconds = first.elapsed().as_secs_f64();
    until("every pod Running", Duration::from_millis(10), || {
        watch.with(|seen| seen.running() >= count)
    })
    .await?;
    let to_running = agent.read()?;
    let runtime_to_running = runtime.as_ref().map(Process::read).transpose()?;
    let machine_to_running = procfs::machine_busy_seconds().map_err(|e| e.to_string())?;
    // The runtime's own process (not its shims, runc or the CNI plugins, which the machine's
    // figure holds): what the agent's CRI calls cost it beside the pods' own work.
    let runtime_to_running = match (runtime_at_rest, runtime_to_running) {
        (Some(before), Some(after)) => json!(after.cpu_seconds - before.cpu_seconds),
        _ => Value::Null,
    };
    let created = created
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let (each, last) = watch.with(|seen| (seen.running_since_each(&created), seen.last_running()));
    let all_running = last.map_or(f64::NAN, |at| {
        at.saturating_duration_since(first).as_secs_f64()
    });

    tokio::time::sleep(Duration::from_secs(run.warmup_seconds)).await;
    let (agent_start, runtime_start) = (
        agent.read()?,
        runtime.as_ref().map(Process::read).transpose()?,
    );
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(run.steady_seconds)).await;
    let seconds = window.elapsed().as_secs_f64();
    let agent_end = agent.read()?;
    let runtime_figures = match (&runtime, runtime_start) {
        (Some(runtime), Some(start)) => {
            let end = runtime.read()?;
            json!({"cpuCores": cores(&start, &end, seconds), "memory": memory(&end)})
        }
        _ => Value::Null,
    };

    let deleted = Instant::now();
    delete_all(&pods, count, pod_name, &watch).await?;
    let (gone, last_gone) = watch.with(|seen| (seen.gone_after(deleted), seen.last_gone()));
    let all_gone = last_gone.map_or(f64::NAN, |at| {
        at.saturating_duration_since(deleted).as_secs_f64()
    });

    Ok(json!({
        "agent": run.agent,
        "round": run.round,
        "pods": count,
        "node": run.node,
        "image": run.image,
        "createSeconds": create_seconds,
        "allRunningSeconds": all_running,
        "createdToRunningSeconds": spread(each),
        "cpuSecondsToRunning": to_running.cpu_seconds - at_rest.cpu_seconds,
        "runtimeCpuSecondsToRunning": runtime_to_running,
        // Everything the machine ran meanwhile: the agent, the runtime and its shims, runc,
        // the CNI plugins, the control plane when it is on the same machine, this bench.
        "machineCpuSecondsToRunning": machine_to_running - machine_at_rest,
        "cores": std::thread::available_parallelism().map_or(0, usize::from),
        "atRest": {"memory": memory(&at_rest)},
        "steady": {
            "windowSeconds": seconds,
            "warmupSeconds": run.warmup_seconds as f64,
            "cpuCores": cores(&agent_start, &agent_end, seconds),
            "memory": memory(&agent_end),
            "threads": agent_end.threads,
            "runtime": runtime_figures,
        },
        "allGoneSeconds": all_gone,
        "deletedToGoneSeconds": spread(gone),
    }))
}

/// Every size in turn; each run's figures as it ends.
pub async fn run(run: &AgentsRun) -> Result<Vec<Value>, String> {
    let client = client(&run.kubeconfig).await?;
    node_ready(&Api::all(client.clone()), &run.node).await?;
    let mut runs = Vec::with_capacity(run.pods.len());
    for &count in &run.pods {
        tokio::time::sleep(Duration::from_secs(run.settle_seconds)).await;
        match one(run, count, &client).await {
            Ok(figures) => {
                eprintln!("{figures}");
                runs.push(figures);
            }
            Err(error) => {
                // A run that failed half-way leaves no pod behind for the next agent.
                let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
                let selected = ListParams::default().labels(SELECTOR);
                if let Err(cleanup) = pods
                    .delete_collection(&DeleteParams::default(), &selected)
                    .await
                {
                    eprintln!("cannot delete the pods labelled {SELECTOR}: {cleanup}");
                }
                return Err(error);
            }
        }
    }
    Ok(runs)
}
