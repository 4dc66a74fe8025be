//! The command line, and how it combines with the configuration file into the settings the
//! daemon runs on. Flags override the file.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{
    config::{Config, ConfigError, RuntimeKind, check_node_name},
    logging::LogFormat,
};

/// nodepulse: a Kubernetes node agent that registers the Node, renews its Lease and reports its
/// conditions, as a tree of supervised actors. Without a command, runs the daemon.
#[derive(Debug, Parser)]
#[command(
    name = "nodepulse",
    version,
    about,
    after_help = "Without a command, nodepulse runs the daemon: it registers the Node, renews its \
                  Lease and reports its conditions until SIGTERM. Exit codes: 0 stopped, 1 could \
                  not run, 2 bad configuration or command line, 3 an actor escalated."
)]
pub struct Cli {
    /// Configuration file (YAML); the embedded default when omitted.
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// kubeconfig of the cluster to join; else KUBECONFIG, ~/.kube/config, then in-cluster.
    #[arg(long, value_name = "FILE", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The Node's name; overrides `nodeName` in the file and the host name.
    #[arg(long, value_name = "NAME", global = true)]
    pub node_name: Option<String>,
    /// Run against an API emulator started in this process (nothing else needed).
    #[arg(long)]
    pub standalone: bool,
    /// Run N simulated nodes in this process (a fleet): those under `nodes:` in the file, then
    /// `<nodeName>-<i>` up to N. Needs `runtime: simulated`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// Log format; `RUST_LOG` filters (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What to do instead of running the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Validate a configuration file: print OK, or the field, value and reason it is refused
    /// (exit 2).
    CheckConfig {
        /// The YAML file to check.
        file: PathBuf,
    },
    /// Print the node's conditions and Lease as the API server has them (exit 1 when they
    /// cannot be read).
    Status,
    /// Print the configuration reference: every field, its default and meaning (Markdown).
    ConfigReference,
}

/// Everything the daemon needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub node_name: String,
    pub kubeconfig: Option<PathBuf>,
    pub standalone: bool,
}

/// Why the settings could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--node-name: invalid value {0}")]
    NodeName(String),
    #[error("cannot determine the node name from the host name ({0}); set nodeName or --node-name")]
    Hostname(String),
    #[error("--nodes: {0}")]
    Nodes(String),
}

impl Cli {
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::embedded_default()?,
        };
        let node_name = match (&self.node_name, &config.node_name) {
            (Some(name), _) => {
                check_node_name(name).map_err(SettingsError::NodeName)?;
                name.clone()
            }
            (None, Some(name)) => name.clone(),
            (None, None) => host_node_name()?,
        };
        if let Some(count) = self.nodes {
            if config.runtime != RuntimeKind::Simulated {
                return Err(SettingsError::Nodes(
                    "a fleet of nodes in one process needs runtime: simulated in the configuration"
                        .to_owned(),
                ));
            }
            config.nodes = crate::fleet::with_generated(&config.nodes, &node_name, count as usize)
                .map_err(SettingsError::Nodes)?;
        }
        Ok(Settings {
            config,
            node_name,
            kubeconfig: self.kubeconfig.clone(),
            standalone: self.standalone,
        })
    }
}

/// The host name, lower-cased, as the kubelet names its Node by default.
fn host_node_name() -> Result<String, SettingsError> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map_err(|error| SettingsError::Hostname(error.to_string()))?;
    let name = hostname.trim().to_lowercase();
    check_node_name(&name).map_err(SettingsError::Hostname)?;
    Ok(name)
}
