//! The command line: flags and subcommands. The flags are only overrides of the configuration
//! file; `config::Settings` resolves the two into what the daemon runs on.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{
    config::{Overrides, Settings, SettingsError},
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
    /// kubeconfig with bootstrap credentials (a bootstrap token, a ServiceAccount token): when
    /// --kubeconfig is missing or holds no valid client certificate, ask for one with a CSR and
    /// write --kubeconfig.
    #[arg(long, value_name = "FILE")]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Where the client certificates are kept (`kubelet-client-current.pem`); `<rootDir>/pki`.
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    /// The Node's name; overrides `nodeName` in the file and the host name.
    #[arg(long, value_name = "NAME", global = true)]
    pub node_name: Option<String>,
    /// Run against an API emulator started in this process (nothing else needed).
    #[arg(long)]
    pub standalone: bool,
    /// Run N simulated nodes in this process (a fleet): those under `nodes:` in the file, then
    /// `<nodeName>-<i>` up to N. Without --config this implies `runtime: simulated`; a file
    /// must say `runtime: simulated`. The fleet's kubeAPIQPS/kubeAPIBurst default to 50/100 a
    /// node, at most 500/1000, unless the file sets them.
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

impl Cli {
    /// What the flags say over the configuration file.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            config_file: self.config.clone(),
            node_name: self.node_name.clone(),
            kubeconfig: self.kubeconfig.clone(),
            bootstrap_kubeconfig: self.bootstrap_kubeconfig.clone(),
            cert_dir: self.cert_dir.clone(),
            standalone: self.standalone,
            nodes: self.nodes,
        }
    }

    /// The settings the flags and the configuration file resolve to.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        Settings::resolve(&self.overrides())
    }
}
