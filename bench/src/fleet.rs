//! A simulated fleet's figures: for each node count, a fresh emulator in a second process and
//! `nodepulse::fleet::measure` in this one (the agent): time to all Ready, lease-renewal lag
//! (each LeaseActor's due → accepted), resident memory and CPU at steady state. Each run is
//! added to (or replaces its node count in) `fleet.json`, which `plot` renders.

use std::{path::Path, time::Duration};

use nodepulse::{
    config::{self, Config, Settings, Source},
    fleet::{
        FleetOptions,
        measure::{FleetFigures, MeasureOptions, measure},
    },
};
use serde_json::{Value, json};

use crate::{processes::start_emulator, results};

/// How a fleet run is configured.
#[derive(Debug, Clone)]
pub struct FleetRun {
    /// The fleet's shared main-client rate limit (kubeAPIQPS = kubeAPIBurst), which paces
    /// registration; `None`: the fleet's defaults, which scale with its size.
    pub qps: Option<u32>,
    /// `supervision.mailboxCapacity`: a bound, not an allocation, so the default serves a
    /// fleet as well as one node.
    pub mailbox_capacity: usize,
    pub warmup: Duration,
    pub steady: Duration,
}

fn entry(figures: &FleetFigures, run: &FleetRun) -> Value {
    json!({
        "config": {
            "kubeAPIQPS": figures.api_qps,
            "kubeAPIBurst": figures.api_burst,
            "mailboxCapacity": run.mailbox_capacity,
            "arbiterThreads": figures.arbiter_threads,
            "warmupSeconds": run.warmup.as_secs_f64(),
        },
        "nodes": figures.nodes,
        "allReadySeconds": figures.all_ready_seconds,
        "rssBytes": figures.rss_bytes,
        "rssBytesPerNode": figures.rss_bytes_per_node,
        "cpuCores": figures.steady_cpu_cores,
        "renewalLagSeconds": {
            "count": figures.renewal_lag.count,
            "p50": figures.renewal_lag.p50_seconds,
            "p90": figures.renewal_lag.p90_seconds,
            "p99": figures.renewal_lag.p99_seconds,
            "max": figures.renewal_lag.max_seconds,
        },
        "figures": figures,
    })
}

async fn measure_one(nodes: usize, run: &FleetRun, scratch: &Path) -> Result<Value, String> {
    let (_emulator, address) = start_emulator()?;
    let kubeconfig = scratch.join("fleet.kubeconfig");
    let text = nodepulse_emulator::kubeconfig::render(&format!("http://{address}"), None);
    std::fs::write(&kubeconfig, text).map_err(|error| error.to_string())?;
    let limits = run.qps.map_or_else(String::new, |qps| {
        format!("kubeAPIQPS: {qps}\nkubeAPIBurst: {qps}\n")
    });
    let yaml = format!(
        "runtime: simulated\nnodeName: sim\n{limits}\
         evictionHard:\n  memory.available: 1Mi\nsupervision:\n  mailboxCapacity: {}\n",
        run.mailbox_capacity,
    );
    let mut config = Config::parse(&yaml, Source::Embedded).map_err(|error| error.to_string())?;
    config.nodes = config::with_generated(&[], "sim", nodes).map_err(|error| error.to_string())?;
    let settings = Settings {
        config,
        node_name: "sim".to_owned(),
        kubeconfig: Some(kubeconfig),
        standalone: false,
        bootstrap: None,
    };
    let options = MeasureOptions {
        fleet: FleetOptions::default(),
        ready_timeout: Duration::from_secs(120),
        warmup: run.warmup,
        steady: run.steady,
    };
    let figures = (measure(&settings, &options).await).map_err(|error| error.to_string())?;
    Ok(entry(&figures, run))
}

/// Measures each node count in turn and writes `fleet.json` after each.
pub async fn run(
    counts: &[usize],
    run: &FleetRun,
    out_dir: &Path,
    scratch: &Path,
) -> Result<(), String> {
    for &nodes in counts {
        let measured = measure_one(nodes, run, scratch).await?;
        println!(
            "{}",
            serde_json::to_string_pretty(&measured).unwrap_or_default()
        );
        let written = results::add_run(
            out_dir,
            "fleet",
            measured,
            |existing| existing["nodes"] == json!(nodes),
            &["nodes"],
        )?;
        eprintln!("{nodes} nodes: written to {}", written.display());
    }
    Ok(())
}
