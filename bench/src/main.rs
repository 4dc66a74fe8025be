//! `nodepulse-bench`: nodepulse's system benchmarks. `single` measures one node (its own
//! process, against the emulator in another): start → Ready, resident memory, CPU, requests and
//! bytes per node-minute on the wire, and input change → PATCH latency. `fleet` measures many
//! simulated nodes in this process against the emulator in another; `plot` renders its figures;
//! `volumes` measures the volume manager (bound → mounted, 100 pods × 4 volumes); `pods` a
//! fleet process with pods on its nodes (bound → Running, steady-state requests and memory,
//! deleted → gone); `agents` a node agent already running on a real cluster and runtime
//! (nodepulse or the kubelet: real pods created → Running, the agent's CPU and memory with them,
//! deleted → gone; `bench/agents.sh` runs it side by side); `runtime-floor` the container runtime
//! alone, pods started straight over CRI with no agent (the floor under `agents`' figures).
//! Results go to `bench/results/*.json` with the machine they were taken on.

mod agents;
mod fleet;
mod latency;
mod plot;
mod pod_watch;
mod pods;
mod processes;
mod procfs;
mod proxy;
mod results;
mod runtime_floor;
mod single;
mod text_layout;
mod volumes;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "nodepulse-bench", about)]
struct Cli {
    /// Where result files are written.
    #[arg(long, default_value = "bench/results")]
    out_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One node: cost at steady state and latency.
    Single {
        /// Length of the steady-state window.
        #[arg(long, default_value_t = 300)]
        seconds: u64,
        /// Input changes timed for the latency figure.
        #[arg(long, default_value_t = 50)]
        samples: usize,
        /// The daemon binary to measure (another build, for A/B runs); the `nodepulse` beside
        /// this binary when omitted.
        #[arg(long, value_name = "PATH")]
        daemon: Option<PathBuf>,
        /// Measure a daemon whose text layout is stale (a debug build has none); refused
        /// otherwise, as its memory would not be the build's.
        #[arg(long)]
        any_layout: bool,
    },
    /// A simulated fleet at each node count: time to Ready, renewal lag, memory, CPU.
    Fleet {
        /// Node counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
        nodes: Vec<usize>,
        /// kubeAPIQPS = kubeAPIBurst of the fleet's shared client; the fleet's defaults (50
        /// and 100 a node, at most 500 and 1000) when omitted.
        #[arg(long)]
        qps: Option<u32>,
        /// `supervision.mailboxCapacity`; 1024 is the configuration's default.
        #[arg(long, default_value_t = 1024)]
        mailbox_capacity: usize,
        #[arg(long, default_value_t = 30)]
        warmup_seconds: u64,
        #[arg(long, default_value_t = 60)]
        steady_seconds: u64,
    },
    /// Renders `fleet.json` in the results directory as `fleet.svg`.
    Plot,
    /// The volume manager: pod bound → volumes set up, and 100 pods × 4 volumes on one node.
    Volumes {
        /// Pods timed one at a time from bound to mounted.
        #[arg(long, default_value_t = 20)]
        samples: usize,
        /// Pods set up together, four volumes each.
        #[arg(long, default_value_t = 100)]
        pods: usize,
        /// The window at rest after they are set up.
        #[arg(long, default_value_t = 70)]
        steady_seconds: u64,
    },
    /// A fleet process with pods: P pods bound across N simulated nodes → all Running, the
    /// steady state's requests, CPU and memory, all deleted → all gone.
    Pods {
        #[arg(long, default_value_t = 1000, value_parser = at_least_one)]
        nodes: usize,
        #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
        pods: usize,
        /// Wait after all Ready and after all gone before memory is read (≥ the daemon's 60 s
        /// heap trim, so what is read is what is kept).
        #[arg(long, default_value_t = 65)]
        settle_seconds: u64,
        /// Wait after all Running before the steady window.
        #[arg(long, default_value_t = 10)]
        warmup_seconds: u64,
        #[arg(long, default_value_t = 60)]
        steady_seconds: u64,
        /// The daemon binary to run the fleet (another build, for A/B runs); the `nodepulse`
        /// beside this binary when omitted.
        #[arg(long, value_name = "PATH")]
        daemon: Option<PathBuf>,
    },
    /// A node agent already running (nodepulse or the kubelet) on a real API server and
    /// container runtime: P real pods created at once → all Running, the agent's CPU and memory
    /// with them running, all deleted → all gone; one run per pod count (`bench/agents.sh`
    /// alternates the agents).
    Agents(agents::AgentsRun),
    /// The container runtime alone, no agent and no API server: P pods started straight over
    /// CRI, C at a time, then removed; and pods started one after another
    /// (`bench/runtime-floor.sh` runs it on the conformance kit's runtime).
    RuntimeFloor(runtime_floor::FloorRun),
}

fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(count) => Ok(count),
        Err(error) => Err(error.to_string()),
    }
}

/// Runs `measure` in an actix system with a scratch directory, prints its figures and hands
/// them to `write`.
fn measured(
    measure: impl AsyncFnOnce(&std::path::Path) -> Result<serde_json::Value, String>,
    write: impl FnOnce(serde_json::Value) -> Result<PathBuf, String>,
) -> Result<(), String> {
    let scratch = scratch()?;
    let figures = actix_rt::System::new().block_on(measure(&scratch));
    // A node leaves its pods' tmpfs volumes mounted when it stops (as the kubelet does), and a
    // run that failed half-way may have left some: none outlives the scratch directory.
    if let Err(error) = nodepulse::volume_plugins::mount::detach_all_below(&scratch) {
        eprintln!(
            "cannot detach the mounts under {}: {error}",
            scratch.display()
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let figures = figures?;
    println!(
        "{}",
        serde_json::to_string_pretty(&figures).unwrap_or_default()
    );
    let path = write(figures)?;
    eprintln!("written to {}", path.display());
    Ok(())
}

fn scratch() -> Result<PathBuf, String> {
    let scratch = std::env::temp_dir().join(format!("nodepulse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|error| error.to_string())?;
    Ok(scratch)
}

async fn single(
    out_dir: &std::path::Path,
    seconds: u64,
    samples: usize,
    daemon: Option<&std::path::Path>,
    any_layout: bool,
) -> Result<(), String> {
    let scratch = scratch()?;
    let mut figures =
        single::run(Duration::from_secs(seconds), &scratch, daemon, any_layout).await?;
    figures["latency"] = latency::run(samples, &scratch).await?;
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "{}",
        serde_json::to_string_pretty(&figures).unwrap_or_default()
    );
    let path = results::write(out_dir, "single", figures)?;
    eprintln!("written to {}", path.display());
    Ok(())
}

fn plot(out_dir: &std::path::Path) -> Result<(), String> {
    let source = out_dir.join("fleet.json");
    let text = std::fs::read_to_string(&source)
        .map_err(|error| format!("{}: {error}", source.display()))?;
    let fleet: serde_json::Value =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", source.display()))?;
    let svg = plot::render(&plot::runs(&fleet)?);
    let target = out_dir.join("fleet.svg");
    std::fs::write(&target, svg).map_err(|error| format!("{}: {error}", target.display()))?;
    eprintln!("written to {}", target.display());
    Ok(())
}

/// Measures `run` and adds each size's figures to `agents.json`, in place of an earlier run of
/// the same agent, round and size.
fn agents_runs(out_dir: &std::path::Path, run: &agents::AgentsRun) -> Result<(), String> {
    let runs = actix_rt::System::new().block_on(agents::run(run))?;
    for figures in runs {
        let same = |existing: &serde_json::Value| {
            ["agent", "round", "pods"]
                .iter()
                .all(|field| existing[*field] == figures[*field])
        };
        let path = results::add_run(out_dir, "agents", figures.clone(), same, &["pods", "round"])?;
        eprintln!("written to {}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Single {
            seconds,
            samples,
            daemon,
            any_layout,
        } => actix_rt::System::new().block_on(single(
            &cli.out_dir,
            seconds,
            samples,
            daemon.as_deref(),
            any_layout,
        )),
        Command::Fleet {
            nodes,
            qps,
            mailbox_capacity,
            warmup_seconds,
            steady_seconds,
        } => {
            let run = fleet::FleetRun {
                qps,
                mailbox_capacity,
                warmup: Duration::from_secs(warmup_seconds),
                steady: Duration::from_secs(steady_seconds),
            };
            scratch().and_then(|scratch| {
                let outcome = actix_rt::System::new().block_on(fleet::run(
                    &nodes,
                    &run,
                    &cli.out_dir,
                    &scratch,
                ));
                let _ = std::fs::remove_dir_all(&scratch);
                outcome
            })
        }
        Command::Plot => plot(&cli.out_dir),
        Command::Volumes {
            samples,
            pods,
            steady_seconds,
        } => {
            let run = volumes::VolumesRun {
                samples,
                pods,
                steady: Duration::from_secs(steady_seconds),
            };
            measured(
                async |scratch| volumes::run(&run, scratch).await,
                |figures| results::write(&cli.out_dir, "volumes", figures),
            )
        }
        Command::Pods {
            nodes,
            pods,
            settle_seconds,
            warmup_seconds,
            steady_seconds,
            daemon,
        } => {
            let run = pods::PodsRun {
                nodes,
                pods,
                settle: Duration::from_secs(settle_seconds),
                warmup: Duration::from_secs(warmup_seconds),
                steady: Duration::from_secs(steady_seconds),
                daemon,
            };
            measured(
                async |scratch| pods::run(&run, scratch).await,
                |figures| {
                    // One run per size and daemon binary: an A/B pair keeps both.
                    let same = |existing: &serde_json::Value| {
                        ["nodes", "pods", "binary"]
                            .iter()
                            .all(|field| existing[*field] == figures[*field])
                    };
                    results::add_run(
                        &cli.out_dir,
                        "pods",
                        figures.clone(),
                        same,
                        &["nodes", "pods"],
                    )
                },
            )
        }
        Command::Agents(run) => agents_runs(&cli.out_dir, &run),
        Command::RuntimeFloor(run) => measured(
            async |scratch| runtime_floor::run(&run, scratch).await,
            |figures| {
                let same = |existing: &serde_json::Value| existing["round"] == figures["round"];
                results::add_run(
                    &cli.out_dir,
                    "runtime-floor",
                    figures.clone(),
                    same,
                    &["round"],
                )
            },
        ),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nodepulse-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
