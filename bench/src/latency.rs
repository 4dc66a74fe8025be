//! Input change → PATCH: NodeStatus and Lease in this process against an in-process emulator;
//! the runtime is reported healthy and unhealthy in turn, and each flip is timed from the
//! message to the moment a watch on the Node shows Ready changed.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{WatchEvent, WatchParams},
};
use nodepulse::{
    apiserver_client::{KubeApi, node::is_ready},
    config::{Config, Settings, Source},
    node::{NodeActors, Parts},
};
use nodepulse_actors::messages::RuntimeHealth;
use nodepulse_emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

use crate::single::client;

const NODE: &str = "bench-latency-1";

fn health(healthy: bool) -> RuntimeHealth {
    RuntimeHealth {
        last_successful_probe: Some(tokio::time::Instant::now()),
        runtime_error: (!healthy).then(|| {
            "container runtime not ready: RuntimeReady=false reason:Bench message:flipped"
                .to_owned()
        }),
        network_error: None,
        runtime_version: Some("containerd://1.7.13".into()),
        observed_at: jiff::Timestamp::now(),
        simulated: true,
        images: Vec::new(),
        capabilities: Default::default(),
    }
}

/// The value at quantile `q` of sorted `values`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub async fn run(samples: usize, scratch: &Path) -> Result<Value, String> {
    let emulator = Emulator::start(EmulatorConfig::for_tests())
        .await
        .map_err(|error| error.to_string())?;
    let kubeconfig = scratch.join("latency.kubeconfig");
    emulator
        .write_kubeconfig(&kubeconfig)
        .map_err(|error| error.to_string())?;
    let settings = Settings {
        config: Config::parse("runtime: simulated\n", Source::Embedded)
            .map_err(|error| error.to_string())?,
        node_name: NODE.to_owned(),
        kubeconfig: Some(kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(Some(&kubeconfig), &settings.config)
        .await
        .map_err(|error| error.to_string())?;
    let node = NodeActors::new(&settings)
        .api(api)
        .parts(Parts::HEARTBEAT)
        .start()
        .map_err(|error| error.to_string())?;
    let (supervisor, addresses) = (node.supervisor, node.addresses);
    let nodes = Api::<Node>::all(client(&emulator.base_url()).await?);
    let send = |healthy: bool| {
        addresses
            .node_status
            .try_send(health(healthy))
            .map_err(|_| "NodeStatus's mailbox refused the input".to_owned())
    };
    send(true)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let version = loop {
        if let Some(node) = nodes.get_opt(NODE).await.ok().flatten().filter(is_ready) {
            break node.metadata.resource_version.unwrap_or_default();
        }
        if Instant::now() > deadline {
            return Err("the node was not Ready within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let params = WatchParams::default().fields(&format!("metadata.name={NODE}"));
    let mut watch = nodes
        .watch(&params, &version)
        .await
        .map_err(|error| error.to_string())?
        .boxed();
    let mut latencies = Vec::with_capacity(samples);
    for sample in 0..samples {
        let healthy = sample % 2 == 1;
        let sent = Instant::now();
        send(healthy)?;
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), watch.try_next())
                .await
                .map_err(|_| "no Ready change within 30 s".to_owned())?
                .map_err(|error| error.to_string())?
                .ok_or("the watch ended")?;
            if let WatchEvent::Modified(node) = event
                && is_ready(&node) == healthy
            {
                latencies.push(sent.elapsed().as_secs_f64());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    supervisor.shutdown(Duration::from_secs(5)).await;
    emulator.shutdown().await;
    latencies.sort_by(f64::total_cmp);
    Ok(json!({
        "samples": latencies.len(),
        "inputToPatchSeconds": {
            "p50": quantile(&latencies, 0.5),
            "p90": quantile(&latencies, 0.9),
            "p99": quantile(&latencies, 0.99),
            "max": latencies.last().copied().unwrap_or(f64::NAN),
        },
    }))
}
