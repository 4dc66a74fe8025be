//! The fleet's figures, for the benchmarks: start a fleet, time until every node is Ready
//! (seen through a watch of the Nodes, as a controller sees them), then over a steady window
//! the Lease renewal lag (from the LeaseActors' own timing, and the age of every Lease's
//! renewTime as the API server holds it), resident memory and CPU from `/proc/self`.

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api,
    api::ListParams,
    runtime::{WatchStreamExt, watcher},
};
use nodepulse_actors::lease::{
    RENEW_JITTER,
    lag::{LagSummary, RENEWAL_LAG},
    renew_interval,
};
use serde::Serialize;

use super::{Fleet, FleetOptions};
use crate::proc_stats;
use crate::{
    apiserver_client::{ConnectError, KubeApi, node::is_ready},
    config::Settings,
    heap,
};

/// What to measure and for how long.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    pub fleet: FleetOptions,
    /// Give up waiting for every node to be Ready after this long.
    pub ready_timeout: Duration,
    /// Time after all-Ready before the steady window, for the start-up to settle.
    pub warmup: Duration,
    /// The steady window over which lag and CPU are taken.
    pub steady: Duration,
}

/// Percentiles of a set of durations, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub count: usize,
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
}

impl Spread {
    pub fn of(mut seconds: Vec<f64>) -> Self {
        if seconds.is_empty() {
            return Self::default();
        }
        seconds.sort_by(f64::total_cmp);
        let at = |fraction: f64| {
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let rank = ((seconds.len() as f64) * fraction).ceil().max(1.0) as usize;
            seconds[rank.min(seconds.len()) - 1]
        };
        Self {
            count: seconds.len(),
            p50_seconds: at(0.5),
            p90_seconds: at(0.9),
            p99_seconds: at(0.99),
            max_seconds: seconds[seconds.len() - 1],
        }
    }
}

/// One fleet's figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetFigures {
    pub nodes: usize,
    pub arbiter_threads: usize,
    /// The shared main client's limits the fleet ran with (`kubeAPIQPS`, `kubeAPIBurst`).
    pub api_qps: u32,
    pub api_burst: u32,
    /// Building and starting every supervisor.
    pub start_seconds: f64,
    /// From the start to the last node seen Ready; `None` when not all were within the timeout.
    pub all_ready_seconds: Option<f64>,
    pub ready_nodes: usize,
    /// When each node was first seen Ready, from the start.
    pub ready_after: Spread,
    /// Renewal lag in the steady window: from when a round was due to when its renewal landed.
    pub renewal_lag: LagSummary,
    /// Age of each fleet Lease's renewTime at the end of the steady window; a live node's
    /// stays under the renew interval × 1.04 plus its lag.
    pub lease_age: Spread,
    /// Leases older than the renew interval × 1.04 + 1 s at the end.
    pub late_leases: usize,
    pub rss_bytes_before: u64,
    pub rss_bytes: u64,
    /// (rss − rss before the fleet) / nodes.
    pub rss_bytes_per_node: u64,
    pub threads: u64,
    /// CPU seconds of the whole process from the start to all-Ready (or the timeout).
    pub cpu_seconds_to_ready: f64,
    /// Cores used on average in the steady window.
    pub steady_cpu_cores: f64,
    pub steady_seconds: f64,
}

/// Why the fleet could not be measured; the benchmark run stops (retrying helps only once the
/// API server answers).
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("{0}")]
    Observer(#[source] kube::Error),
    #[error("cannot list the Leases: {0}")]
    ListLeases(#[source] kube::Error),
}

/// Starts the fleet `settings.config.nodes` describes, measures it and stops it. Must run
/// inside an actix `System`.
pub async fn measure(
    settings: &Settings,
    options: &MeasureOptions,
) -> Result<FleetFigures, MeasureError> {
    let names: HashSet<String> = settings
        .config
        .nodes
        .iter()
        .map(|node| node.name.clone())
        .collect();
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config).await?;
    let (client_config, _) =
        crate::apiserver_client::client_config(settings.kubeconfig.as_deref()).await?;
    let observer = kube::Client::try_from(client_config).map_err(MeasureError::Observer)?;
    let rss_bytes_before = proc_stats::resident_bytes().unwrap_or(0);
    let cpu_before = proc_stats::cpu_seconds().unwrap_or(0.0);

    let started = Instant::now();
    let ready = actix_rt::spawn(ready_times(observer.clone(), names.clone(), started));
    let fleet = Fleet::start(settings, Arc::clone(&api), &options.fleet);
    // As the daemon's run does around its fleet (`daemon::serve`).
    let _trimming = heap::start_trimming();
    let start_seconds = started.elapsed().as_secs_f64();
    let ready_after = tokio::time::timeout(options.ready_timeout, ready)
        .await
        .ok()
        .and_then(Result::ok);
    let cpu_seconds_to_ready = proc_stats::cpu_seconds().unwrap_or(0.0) - cpu_before;
    let (all_ready_seconds, ready_after) = match ready_after {
        Some(times) => (times.iter().copied().reduce(f64::max), times),
        None => (None, Vec::new()),
    };
    tracing::info!(?all_ready_seconds, nodes = names.len(), "fleet ready");

    tokio::time::sleep(options.warmup).await;
    RENEWAL_LAG.reset();
    let cpu_start = proc_stats::cpu_seconds().unwrap_or(0.0);
    let window = Instant::now();
    tokio::time::sleep(options.steady).await;
    let steady_seconds = window.elapsed().as_secs_f64();
    let steady_cpu_cores = (proc_stats::cpu_seconds().unwrap_or(0.0) - cpu_start) / steady_seconds;
    let renewal_lag = RENEWAL_LAG.summary();
    let rss_bytes = proc_stats::resident_bytes().unwrap_or(0);
    let threads = proc_stats::threads().unwrap_or(0);
    let ages = lease_ages(&observer, &names).await?;
    let late_after = renew_interval(settings.config.node_lease_duration_seconds)
        .mul_f64(1.0 + RENEW_JITTER)
        .as_secs_f64()
        + 1.0;
    let late_leases = ages.iter().filter(|age| **age > late_after).count();

    fleet.shutdown(Duration::from_secs(30)).await;
    let nodes = names.len();
    Ok(FleetFigures {
        nodes,
        arbiter_threads: options.fleet.arbiters,
        api_qps: settings.config.effective_api_qps(),
        api_burst: settings.config.effective_api_burst(),
        start_seconds,
        all_ready_seconds: all_ready_seconds.filter(|_| ready_after.len() == nodes),
        ready_nodes: ready_after.len(),
        ready_after: Spread::of(ready_after),
        renewal_lag,
        lease_age: Spread::of(ages),
        late_leases,
        rss_bytes_before,
        rss_bytes,
        rss_bytes_per_node: rss_bytes.saturating_sub(rss_bytes_before) / nodes.max(1) as u64,
        threads,
        cpu_seconds_to_ready,
        steady_cpu_cores,
        steady_seconds,
    })
}

/// Watches the Nodes until every one of `names` has been Ready=True; when each first was, in
/// seconds after `started`.
async fn ready_times(client: kube::Client, names: HashSet<String>, started: Instant) -> Vec<f64> {
    let mut seen = HashSet::new();
    let mut times = Vec::with_capacity(names.len());
    let mut nodes = std::pin::pin!(
        watcher(Api::<Node>::all(client), watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while seen.len() < names.len() {
        let Some(event) = nodes.next().await else {
            break;
        };
        let Ok(node) = event else { continue };
        let name = node.metadata.name.clone().unwrap_or_default();
        if names.contains(&name) && is_ready(&node) && seen.insert(name) {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    times
}

/// How old each fleet Lease's renewTime is now, in seconds.
async fn lease_ages(
    client: &kube::Client,
    names: &HashSet<String>,
) -> Result<Vec<f64>, MeasureError> {
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .list(&ListParams::default())
        .await
        .map_err(MeasureError::ListLeases)?;
    let now = Timestamp::now();
    Ok(leases
        .items
        .iter()
        .filter(|lease| {
            lease
                .metadata
                .name
                .as_ref()
                .is_some_and(|name| names.contains(name))
        })
        .filter_map(|lease| lease.spec.as_ref()?.renew_time.as_ref())
        .map(|renewed| now.duration_since(renewed.0).as_secs_f64())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_nearest_rank_percentiles() {
        let spread = Spread::of((1..=100).map(f64::from).rev().collect());
        assert_eq!(spread.count, 100);
        assert!((spread.p50_seconds - 50.0).abs() < 1e-9);
        assert!((spread.p99_seconds - 99.0).abs() < 1e-9);
        assert!((spread.max_seconds - 100.0).abs() < 1e-9);
        assert_eq!(Spread::of(Vec::new()), Spread::default());
    }
}
