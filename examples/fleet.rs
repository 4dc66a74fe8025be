//! Measures a simulated fleet against an API server in another process (the emulator:
//! `cargo run --release -p nodepulse-emulator -- --kubeconfig-out /tmp/emulator.kubeconfig`)
//! and adds the run to a `fleet.json` in the format `bench/results/README.md` describes.
//!
//! `cargo run --release --example fleet -- --kubeconfig /tmp/emulator.kubeconfig --nodes 1000
//!  --out bench/results/fleet.json`

use std::{path::PathBuf, time::Duration};

use clap::Parser;
use nodepulse::{
    cli::Settings,
    config::{Config, Source},
    fleet::{
        self, FleetOptions,
        measure::{FleetFigures, MeasureOptions, measure},
    },
};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: PathBuf,
    #[arg(long)]
    nodes: usize,
    /// Node names are `<prefix>-<i>`.
    #[arg(long, default_value = "sim")]
    prefix: String,
    /// The fleet's shared main-client rate limit (kubeAPIQPS, and kubeAPIBurst the same): it
    /// paces registration, which keeps 10,000 nodes from opening thousands of connections at
    /// once.
    #[arg(long, default_value_t = 500)]
    qps: u32,
    /// Messages each actor's mailbox holds (`supervision.mailboxCapacity`): the bounded queue
    /// is allocated whole, 24 bytes a message, six per node.
    #[arg(long, default_value_t = 1024)]
    mailbox_capacity: usize,
    /// How often each actor is pinged for liveness (`supervision.livenessInterval`).
    #[arg(long, default_value = "1s")]
    liveness_interval: String,
    /// Arbiter threads; the machine's cores by default.
    #[arg(long)]
    arbiters: Option<usize>,
    #[arg(long, default_value_t = 120)]
    ready_timeout_seconds: u64,
    #[arg(long, default_value_t = 30)]
    warmup_seconds: u64,
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// Adds (or replaces) this node count's run in the file.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib: Option<u64> = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok());
    json!({
        "cpu": model,
        "cores": std::thread::available_parallelism().map(std::num::NonZero::get).ok(),
        "memoryBytes": memory_kib.map(|kib| kib * 1024),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|text| text.trim().to_owned()),
    })
}

fn run_entry(figures: &FleetFigures, args: &Args) -> Value {
    json!({
        "config": {
            "kubeAPIQPS": args.qps,
            "mailboxCapacity": args.mailbox_capacity,
            "livenessInterval": args.liveness_interval,
            "arbiterThreads": figures.arbiter_threads,
            "warmupSeconds": args.warmup_seconds,
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

fn main() -> Result<(), String> {
    let args = Args::parse();
    // Warnings and errors only unless RUST_LOG says otherwise: a fleet's info lines would
    // cost more than the nodes.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let yaml = format!(
        "runtime: simulated\nnodeName: {}\nkubeAPIQPS: {}\nkubeAPIBurst: {}\nevictionHard:\n  memory.available: 1Mi\nsupervision:\n  mailboxCapacity: {}\n  livenessInterval: {}\n",
        args.prefix, args.qps, args.qps, args.mailbox_capacity, args.liveness_interval
    );
    let mut config = Config::parse(&yaml, Source::Embedded).map_err(|error| error.to_string())?;
    config.nodes = fleet::with_generated(&[], &args.prefix, args.nodes)?;
    let settings = Settings {
        config,
        node_name: args.prefix.clone(),
        kubeconfig: Some(args.kubeconfig.clone()),
        standalone: false,
    };
    let options = MeasureOptions {
        fleet: args
            .arbiters
            .map_or_else(FleetOptions::default, |arbiters| FleetOptions { arbiters }),
        ready_timeout: Duration::from_secs(args.ready_timeout_seconds),
        warmup: Duration::from_secs(args.warmup_seconds),
        steady: Duration::from_secs(args.steady_seconds),
    };
    let figures = actix_rt::System::new().block_on(async { measure(&settings, &options).await })?;
    let entry = run_entry(&figures, &args);
    println!(
        "{}",
        serde_json::to_string_pretty(&entry).map_err(|error| error.to_string())?
    );
    if let Some(path) = &args.out {
        let mut file: Value = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| json!({ "runs": [] }));
        file["machine"] = machine();
        let runs = file["runs"]
            .as_array_mut()
            .ok_or("the file's runs is not a list")?;
        runs.retain(|run| run["nodes"] != json!(figures.nodes));
        runs.push(entry);
        runs.sort_by_key(|run| run["nodes"].as_u64().unwrap_or(0));
        if let Some(directory) = path.parent() {
            std::fs::create_dir_all(directory).map_err(|error| error.to_string())?;
        }
        let text = serde_json::to_string_pretty(&file).map_err(|error| error.to_string())?;
        std::fs::write(path, text + "\n").map_err(|error| error.to_string())?;
    }
    Ok(())
}
