//! The volume manager's cost: time from a pod bound to its volumes set up (configMap + secret +
//! projected token), and 100 pods × 4 volumes on one node — time to set them all up, CPU and
//! resident memory of this process (the node's actors; the emulator runs in its own process),
//! files written, and CPU at rest over a window that holds a content refresh (`syncFrequency`).

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Settings, Source},
    node::NodeActors,
};
use serde_json::{Value, json};

use crate::{latency::quantile, processes::start_emulator, procfs::usage, single::client};

const NODE: &str = "bench-volumes-1";
const NAMESPACE: &str = "default";

/// How the run is sized.
pub struct VolumesRun {
    pub samples: usize,
    pub pods: usize,
    pub steady: Duration,
}

fn volumes(four: bool) -> Value {
    let mut list = vec![
        json!({"name": "cfg", "configMap": {"name": "bench-cm"}}),
        json!({"name": "creds", "secret": {"secretName": "bench-secret"}}),
        json!({"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}),
    ];
    if four {
        list.push(json!({"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}));
    }
    Value::Array(list)
}

fn pod(name: &str, volumes: &Value) -> Result<Pod, String> {
    let mounts: Vec<Value> = volumes
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| json!({"name": v["name"], "mountPath": format!("/v/{}", v["name"].as_str().unwrap_or_default())}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"bench": "volumes"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "pause", "volumeMounts": mounts}],
                 "volumes": volumes},
    }))
    .map_err(|error| error.to_string())
}

/// The `..data` links of `pod_uid`'s volumes under `root`: one per set-up volume.
fn set_up(root: &Path, pod_uid: &str, volumes: &Value) -> bool {
    volumes.as_array().into_iter().flatten().all(|v| {
        let plugin = if v.get("configMap").is_some() {
            "configmap"
        } else if v.get("secret").is_some() {
            "secret"
        } else if v.get("projected").is_some() {
            "projected"
        } else {
            "downward-api"
        };
        root.join("pods")
            .join(pod_uid)
            .join("volumes")
            .join(format!("kubernetes.io~{plugin}"))
            .join(v["name"].as_str().unwrap_or_default())
            .join("..data")
            .exists()
    })
}

fn count_files(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| match entry.file_type() {
                    Ok(kind) if kind.is_dir() => 1 + count_files(&entry.path()),
                    Ok(_) => 1,
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Polls `check` every `every` until it holds; how long that took.
async fn wait(
    what: &str,
    patience: Duration,
    every: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<Duration, String> {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > patience {
            return Err(format!("{what}: not within {patience:?}"));
        }
        tokio::time::sleep(every).await;
    }
    Ok(started.elapsed())
}

pub async fn run(run: &VolumesRun, scratch: &Path) -> Result<Value, String> {
    let (_emulator, address) = start_emulator()?;
    let server = format!("http://{address}");
    let kubeconfig = scratch.join("volumes.kubeconfig");
    std::fs::write(
        &kubeconfig,
        nodepulse_emulator::kubeconfig::render(&server, None),
    )
    .map_err(|error| error.to_string())?;
    let root: PathBuf = scratch.join("root");
    let yaml = format!(
        "runtime: simulated\nrootDir: {}\nevictionHard:\n  memory.available: 1Mi\nkubeAPIQPS: 200\nkubeAPIBurst: 400\n",
        root.display()
    );
    let settings = Settings {
        config: Config::parse(&yaml, Source::Embedded).map_err(|error| error.to_string())?,
        node_name: NODE.to_owned(),
        kubeconfig: Some(kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(Some(&kubeconfig), &settings.config)
        .await
        .map_err(|error| error.to_string())?;
    let supervisor = NodeActors::new(&settings)
        .api(api)
        .start()
        .map_err(|error| error.to_string())?
        .supervisor;
    let client = client(&server).await?;
    let post = PostParams::default();
    let config_map: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "bench-cm"}, "data": {"app.conf": "x".repeat(1024)}}),
    )
    .map_err(|error| error.to_string())?;
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "bench-secret"}, "stringData": {"password": "p"}}),
    )
    .map_err(|error| error.to_string())?;
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&post, &config_map)
        .await
        .map_err(|error| error.to_string())?;
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&post, &secret)
        .await
        .map_err(|error| error.to_string())?;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let patience = Duration::from_secs(120);

    // Bound → mounted, one pod at a time.
    let three = volumes(false);
    let mut latencies = Vec::new();
    for i in 0..run.samples {
        let name = format!("lat-{i}");
        let created = pods
            .create(&post, &pod(&name, &three)?)
            .await
            .map_err(|error| error.to_string())?;
        let uid = created.metadata.uid.unwrap_or_default();
        let took = wait("volumes set up", patience, Duration::from_millis(1), || {
            set_up(&root, &uid, &three)
        })
        .await?;
        latencies.push(took.as_secs_f64() * 1000.0);
        pods.delete(&name, &DeleteParams::default().grace_period(0))
            .await
            .map_err(|error| error.to_string())?;
    }
    latencies.sort_by(f64::total_cmp);

    // 100 pods × 4 volumes.
    let four = volumes(true);
    let me = std::process::id();
    let before = usage(me).map_err(|error| error.to_string())?;
    let started = Instant::now();
    let mut uids = Vec::new();
    for chunk in (0..run.pods).collect::<Vec<_>>().chunks(20) {
        let creates = chunk.iter().map(|i| {
            let pods = pods.clone();
            let manifest = pod(&format!("scale-{i}"), &four);
            let post = post.clone();
            async move {
                let manifest = manifest?;
                pods.create(&post, &manifest)
                    .await
                    .map(|p| p.metadata.uid.unwrap_or_default())
                    .map_err(|error| error.to_string())
            }
        });
        for uid in futures::future::join_all(creates).await {
            uids.push(uid?);
        }
    }
    // Polled every 20 ms, forgetting each pod once set up: the poll's own cost stays small
    // beside what is measured (it runs in this process too).
    let mut waiting = uids.clone();
    wait(
        "every volume set up",
        patience,
        Duration::from_millis(20),
        || {
            waiting.retain(|uid| !set_up(&root, uid, &four));
            waiting.is_empty()
        },
    )
    .await?;
    let set_up_in = started.elapsed();
    let after = usage(me).map_err(|error| error.to_string())?;
    let files = count_files(&root.join("pods"));
    let steady_start = usage(me).map_err(|error| error.to_string())?;
    tokio::time::sleep(run.steady).await;
    let steady_end = usage(me).map_err(|error| error.to_string())?;
    let _ = supervisor.shutdown(Duration::from_secs(10)).await;
    // The node leaves its pods' tmpfs mounts in place when it stops, as the kubelet does.
    nodepulse::volume_plugins::mount::detach_all_below(&root).map_err(|error| error.to_string())?;
    Ok(json!({
        "boundToMountedMs": {
            "samples": latencies.len(),
            "volumes": "configMap + secret + projected serviceAccountToken",
            "p50": quantile(&latencies, 0.5),
            "p90": quantile(&latencies, 0.9),
            "max": latencies.last(),
        },
        "scale": {
            "pods": run.pods,
            "volumesPerPod": 4,
            "setUpSeconds": set_up_in.as_secs_f64(),
            "cpuSecondsToSetUp": after.cpu_seconds - before.cpu_seconds,
            "rssBeforeMiB": before.rss_bytes as f64 / 1048576.0,
            "rssAfterMiB": after.rss_bytes as f64 / 1048576.0,
            "filesAndDirsUnderPods": files,
            "steadySeconds": run.steady.as_secs_f64(),
            "steadyCpuPercent": (steady_end.cpu_seconds - steady_start.cpu_seconds) * 100.0 / run.steady.as_secs_f64(),
            "note": "this process holds the node's actors and the bench client; the emulator runs in its own; the steady window holds one content refresh (syncFrequency 1m) when at least 60 s long",
        },
    }))
}
