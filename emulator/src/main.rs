//! `nodepulse-emulator`: runs the Kubernetes API emulator as a standalone server.
//!
//! Parses flags, starts the emulator, optionally writes a kubeconfig, and serves until SIGINT or
//! SIGTERM. Exit codes: 0 after a clean stop, 2 for bad flags (clap), 1 when it cannot start.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nodepulse_emulator::config::parse_duration;
use nodepulse_emulator::{
    AttachDetachConfig, AuthConfig, Emulator, EmulatorConfig, LifecycleConfig, User, WatchConfig,
};

/// A Kubernetes API server emulator for nodepulse's tests and standalone mode.
#[derive(Parser, Debug)]
#[command(name = "nodepulse-emulator", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:16443")]
    address: std::net::SocketAddr,
    /// Write a kubeconfig for the emulator to this path.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Disable the node-lifecycle controller.
    #[arg(long)]
    no_node_lifecycle: bool,
    /// Disable the taint manager and TTL controller writes to Nodes.
    #[arg(long)]
    no_node_controllers: bool,
    /// Disable the attach/detach controller (VolumeAttachments, node volumesAttached).
    #[arg(long)]
    no_attach_detach: bool,
    /// Do not play the CSI drivers' external attachers (leave VolumeAttachment status alone).
    #[arg(long)]
    no_attacher: bool,
    /// How often node health is evaluated.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    node_monitor_period: Duration,
    /// Silence after which a node's conditions become Unknown.
    #[arg(long, default_value = "50s", value_parser = parse_duration)]
    node_monitor_grace_period: Duration,
    /// Grace for nodes that never posted a Ready condition.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    node_startup_grace_period: Duration,
    /// Accept this bearer token for a user: TOKEN=USER (repeatable). Use USER system:node:<name>
    /// for a node identity. With tokens, anonymous requests are refused.
    #[arg(long = "token", value_name = "TOKEN=USER")]
    tokens: Vec<String>,
    /// Restrict system:node:<name> users to their own Node, Lease and bound pods.
    #[arg(long)]
    node_restriction: bool,
    /// Changes kept for resuming watches (older resourceVersions get 410 Expired).
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Interval of watch BOOKMARK events.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    bookmark_interval: Duration,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

impl Args {
    fn config(&self) -> Result<EmulatorConfig, String> {
        let mut auth = AuthConfig {
            node_restriction: self.node_restriction,
            ..AuthConfig::default()
        };
        for entry in &self.tokens {
            let (token, user) = entry
                .split_once('=')
                .ok_or_else(|| format!("--token {entry:?}: expected TOKEN=USER"))?;
            let user = match user.strip_prefix("system:node:") {
                Some(node) => User::node(node),
                None => User::admin(user),
            };
            auth.tokens.insert(token.to_string(), user);
        }
        auth.allow_anonymous = auth.tokens.is_empty();
        Ok(EmulatorConfig {
            address: self.address,
            lifecycle: LifecycleConfig {
                enabled: !self.no_node_lifecycle,
                monitor_period: self.node_monitor_period,
                grace_period: self.node_monitor_grace_period,
                startup_grace_period: self.node_startup_grace_period,
            },
            node_controllers: !self.no_node_controllers,
            attach_detach: AttachDetachConfig {
                enabled: !self.no_attach_detach,
                attacher: !self.no_attacher,
            },
            auth,
            watch: WatchConfig {
                history: self.watch_history,
                bookmark_interval: self.bookmark_interval,
                ..WatchConfig::default()
            },
            workers: self.workers,
            ..EmulatorConfig::default()
        })
    }
}

#[actix_web::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let config = match args.config() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("nodepulse-emulator: {message}");
            return ExitCode::from(2);
        }
    };
    let emulator = match Emulator::start(config).await {
        Ok(emulator) => emulator,
        Err(e) => {
            eprintln!("nodepulse-emulator: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.kubeconfig_out {
        if let Err(e) = emulator.write_kubeconfig(path) {
            eprintln!("nodepulse-emulator: {e}");
            return ExitCode::FAILURE;
        }
        println!("kubeconfig written to {}", path.display());
    }
    println!("serving the Kubernetes API at {}", emulator.base_url());
    wait_for_signal().await;
    emulator.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
