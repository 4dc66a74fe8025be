//! The container runtime alone, with no node agent and no API server: P pods (the `agents`
//! mode's busybox loop, its image present) started straight over CRI, C at a time, each with the
//! calls an agent makes for it in their order (RunPodSandbox, CreateContainer, StartContainer),
//! then every sandbox stopped and removed; and pods started one after another, each timed alone.
//! That is the floor under any agent's "all Running" and "bound → Running" with this runtime on
//! this machine: the agent's own work, the API server's and the watch round trips come on top.
//! `bench/runtime-floor.sh` runs it on the conformance kit's runtime, the one `agents` uses.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use nodepulse_actors::ports::{
    ContainerConfig, ContainerRuntime, Labels, Mount, SandboxConfig, SandboxFilter, SandboxMetadata,
};
use nodepulse_cri::client::CriClient;
use nodepulse_cri::provider::{POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};
use serde_json::{Value, json};

use crate::{
    agents::UNTIL_TERM,
    pods::spread,
    procfs::{self, Usage},
};

/// Marks the sandboxes this mode makes, for whoever lists the runtime meanwhile (its own
/// clean-up removes what it recorded making, `Floor::made`).
const RUN_LABEL: &str = "nodepulse-bench/runtime-floor";
/// A runtime call may take this long under a burst before the run fails.
const CALL_TIMEOUT: Duration = Duration::from_secs(240);
const NAMESPACE: &str = "default";

/// What to measure and on which runtime (the `runtime-floor` mode's arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct FloorRun {
    /// The runtime's CRI endpoint (`unix:///…/containerd.sock`). It must run no sandbox: the
    /// floor is the runtime's at rest.
    #[arg(long)]
    pub endpoint: String,
    /// Pod counts, comma-separated; each is started at every concurrency.
    #[arg(long, value_delimiter = ',', default_value = "100", value_parser = crate::at_least_one)]
    pub pods: Vec<usize>,
    /// Pods being started at once, comma-separated, one run each (a pod's own calls stay in
    /// order).
    #[arg(long, value_delimiter = ',', default_value = "100,16,8,4,2", value_parser = crate::at_least_one)]
    pub concurrency: Vec<usize>,
    /// Pods started one after another, each timed alone (0: none).
    #[arg(long, default_value_t = 10)]
    pub one_by_one: usize,
    /// The pods' image; it must be present (nothing is pulled).
    #[arg(
        long,
        default_value = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
    )]
    pub image: String,
    /// The runtime's process ID (containerd), whose own CPU is reported beside the machine's.
    #[arg(long)]
    pub runtime_pid: Option<u32>,
    /// The round of an interleaved session.
    #[arg(long, default_value_t = 1)]
    pub round: u32,
    /// Wait before each run, so the runtime is at rest when it starts.
    #[arg(long, default_value_t = 5)]
    pub settle_seconds: u64,
}

/// The runtime and what every pod shares: the image as the runtime names it, and a scratch
/// directory for the files an agent would write (log directories, `/etc/hosts`, the
/// termination-message file, the service-account token).
struct Floor {
    cri: CriClient,
    image_ref: String,
    scratch: PathBuf,
    run: String,
    /// Every sandbox made and not yet removed, so a failed run leaves none behind.
    made: Mutex<Vec<String>>,
}

/// One pod's start: its sandbox, when StartContainer answered, and how long its own three
/// calls took (from its RunPodSandbox, not counting a wait for its turn).
struct Started {
    sandbox: String,
    at: Instant,
    calls_seconds: f64,
}

impl Floor {
    async fn connect(run: &FloorRun, scratch: &Path) -> Result<Self, String> {
        let cri = CriClient::for_node(&run.endpoint, CALL_TIMEOUT)
            .map_err(|error| format!("{}: {error}", run.endpoint))?;
        let image = cri
            .image_status(run.image.clone())
            .await
            .map_err(|error| format!("ImageStatus {}: {error}", run.image))?
            .ok_or_else(|| format!("the runtime has no image {}: import it first", run.image))?;
        let existing = cri
            .list_pod_sandboxes(SandboxFilter::default())
            .await
            .map_err(|error| format!("ListPodSandbox: {error}"))?;
        if !existing.is_empty() {
            return Err(format!(
                "the runtime already has pod sandboxes ({}): the floor is measured on an idle runtime",
                existing.len()
            ));
        }
        Ok(Self {
            cri,
            image_ref: image.id,
            scratch: scratch.to_owned(),
            run: format!("{}-{}", std::process::id(), run.round),
            made: Mutex::default(),
        })
    }

    /// The sandbox an agent would ask for pod `name` (no agent-specific settings: the
    /// runtime's defaults), its log directory made.
    fn sandbox_config(&self, name: &str) -> Result<SandboxConfig, String> {
        let uid = format!("{}-{name}", self.run);
        let log_directory = self.scratch.join(format!("pods/{NAMESPACE}_{name}_{uid}"));
        std::fs::create_dir_all(&log_directory)
            .map_err(|error| format!("{}: {error}", log_directory.display()))?;
        let labels: Labels = [
            (POD_NAME_LABEL, name),
            (POD_NAMESPACE_LABEL, NAMESPACE),
            (POD_UID_LABEL, uid.as_str()),
            (RUN_LABEL, self.run.as_str()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
        Ok(SandboxConfig {
            metadata: SandboxMetadata {
                name: name.to_owned(),
                uid,
                namespace: NAMESPACE.to_owned(),
                attempt: 0,
            },
            hostname: name.to_owned(),
            log_directory,
            labels,
            ..SandboxConfig::default()
        })
    }

    /// The container, with the mounts an agent gives every container: `/etc/hosts`, the
    /// termination-message file and the service-account token directory (read-only).
    fn container_config(&self, sandbox: &SandboxConfig) -> Result<ContainerConfig, String> {
        let files = sandbox.log_directory.join("files");
        let token = files.join("token");
        std::fs::create_dir_all(&token).map_err(|error| format!("{}: {error}", token.display()))?;
        let write = |path: PathBuf, text: &str| {
            std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
            Ok::<_, String>(path)
        };
        for file in ["token", "ca.crt", "namespace"] {
            write(token.join(file), NAMESPACE)?;
        }
        let mount = |container_path: &str, host_path: PathBuf, readonly: bool| Mount {
            container_path: container_path.into(),
            host_path,
            readonly,
            ..Mount::default()
        };
        Ok(ContainerConfig {
            name: "sleep".to_owned(),
            image: self.image_ref.clone(),
            command: vec!["/bin/sh".to_owned(), "-c".to_owned(), UNTIL_TERM.to_owned()],
            mounts: vec![
                mount(
                    "/etc/hosts",
                    write(files.join("hosts"), "127.0.0.1 localhost\n")?,
                    false,
                ),
                mount(
                    "/dev/termination-log",
                    write(files.join("termination"), "")?,
                    false,
                ),
                mount("/var/run/secrets/kubernetes.io/serviceaccount", token, true),
            ],
            log_path: PathBuf::from("sleep/0.log"),
            ..ContainerConfig::default()
        })
    }

    /// Pod `name` started: RunPodSandbox, CreateContainer, StartContainer.
    async fn start(&self, name: &str) -> Result<Started, String> {
        let sandbox = self.sandbox_config(name)?;
        let container = self.container_config(&sandbox)?;
        let began = Instant::now();
        let id = self
            .cri
            .run_pod_sandbox(sandbox.clone(), String::new())
            .await
            .map_err(|error| format!("RunPodSandbox {name}: {error}"))?;
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id.clone());
        let container = self
            .cri
            .create_container(id.clone(), container, sandbox)
            .await
            .map_err(|error| format!("CreateContainer {name}: {error}"))?;
        self.cri
            .start_container(container)
            .await
            .map_err(|error| format!("StartContainer {name}: {error}"))?;
        Ok(Started {
            sandbox: id,
            at: Instant::now(),
            calls_seconds: began.elapsed().as_secs_f64(),
        })
    }

    /// Stops and removes `sandbox` (its container and network with it).
    async fn remove(&self, sandbox: String) -> Result<(), String> {
        self.cri
            .stop_pod_sandbox(sandbox.clone())
            .await
            .map_err(|error| format!("StopPodSandbox {sandbox}: {error}"))?;
        self.cri
            .remove_pod_sandbox(sandbox.clone())
            .await
            .map_err(|error| format!("RemovePodSandbox {sandbox}: {error}"))?;
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|made| made != &sandbox);
        Ok(())
    }

    /// Every sandbox this run made and has not removed, removed (after a failure).
    async fn remove_left(&self) {
        let left = self
            .made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for sandbox in left {
            if let Err(error) = self.remove(sandbox).await {
                eprintln!("{error}");
            }
        }
    }

    /// `count` pods started `concurrency` at a time, then all removed as many at a time.
    async fn burst(
        &self,
        count: usize,
        concurrency: usize,
        runtime: Option<u32>,
    ) -> Result<Value, String> {
        let at_rest = Readings::now(runtime)?;
        let first = Instant::now();
        let started: Vec<Started> = stream::iter(0..count)
            .map(|index| async move { self.start(&format!("floor-{concurrency}-{index}")).await })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let all_started = first.elapsed().as_secs_f64();
        let running = Readings::now(runtime)?;
        let removing = Instant::now();
        let removed: Vec<Result<(), String>> = stream::iter(started.iter())
            .map(|pod| self.remove(pod.sandbox.clone()))
            .buffer_unordered(concurrency)
            .collect()
            .await;
        removed.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(json!({
            "pods": count,
            "concurrency": concurrency,
            "allStartedSeconds": all_started,
            // From the burst's first call, as `agents` times each pod from its create: a pod
            // waiting for its turn counts.
            "eachStartedSeconds": spread(
                started.iter().map(|pod| pod.at.duration_since(first).as_secs_f64()).collect()
            ),
            "eachPodsCallsSeconds": spread(started.iter().map(|pod| pod.calls_seconds).collect()),
            "machineCpuSecondsToStarted": running.machine - at_rest.machine,
            "runtimeCpuSecondsToStarted": running.runtime_cpu_since(&at_rest),
            "allRemovedSeconds": removing.elapsed().as_secs_f64(),
        }))
    }

    /// `count` pods, each started (and removed) after the one before.
    async fn one_by_one(&self, count: usize) -> Result<Value, String> {
        let mut each = Vec::with_capacity(count);
        for index in 0..count {
            let pod = self.start(&format!("floor-alone-{index}")).await?;
            each.push(pod.calls_seconds);
            self.remove(pod.sandbox).await?;
        }
        Ok(json!({ "pods": count, "startedSeconds": spread(each) }))
    }
}

/// The machine's busy CPU time and the runtime's own.
struct Readings {
    machine: f64,
    runtime: Option<Usage>,
}

impl Readings {
    fn now(runtime: Option<u32>) -> Result<Self, String> {
        Ok(Self {
            machine: procfs::machine_busy_seconds().map_err(|error| error.to_string())?,
            runtime: runtime
                .map(|pid| {
                    procfs::usage(pid).map_err(|error| format!("the runtime (pid {pid}): {error}"))
                })
                .transpose()?,
        })
    }

    fn runtime_cpu_since(&self, before: &Self) -> Value {
        match (&before.runtime, &self.runtime) {
            (Some(before), Some(now)) => json!(now.cpu_seconds - before.cpu_seconds),
            _ => Value::Null,
        }
    }
}

/// Every pod count at every concurrency, then the pods one by one; what was made is removed,
/// also when a call fails.
pub async fn run(run: &FloorRun, scratch: &Path) -> Result<Value, String> {
    let floor = Floor::connect(run, scratch).await?;
    let settle = Duration::from_secs(run.settle_seconds);
    let mut bursts = Vec::new();
    let outcome = async {
        for &count in &run.pods {
            for &concurrency in &run.concurrency {
                tokio::time::sleep(settle).await;
                let figures = floor.burst(count, concurrency, run.runtime_pid).await?;
                eprintln!("{figures}");
                bursts.push(figures);
            }
        }
        tokio::time::sleep(settle).await;
        floor.one_by_one(run.one_by_one).await
    }
    .await;
    floor.remove_left().await;
    Ok(json!({
        "round": run.round,
        "image": run.image,
        "endpoint": run.endpoint,
        "cores": std::thread::available_parallelism().map_or(0, usize::from),
        "bursts": bursts,
        "oneByOne": outcome?,
    }))
}
