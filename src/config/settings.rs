//! The settings the daemon runs on: the validated configuration resolved with the command
//! line's overrides (node name, kubeconfig, standalone mode, fleet size). They live here, below
//! every module that reads them, so the flag parser is only a way to fill them in.

use std::path::PathBuf;

use super::{
    Config, ConfigError, FleetNodeConfig, InvalidSetting, NotInThisBuild, RuntimeKind, check_built,
    check_node_name, fleet::FleetSizeError, with_generated,
};

/// Everything the daemon needs, resolved and validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub node_name: String,
    pub kubeconfig: Option<PathBuf>,
    pub standalone: bool,
    /// TLS bootstrap, when `--bootstrap-kubeconfig` asks for it.
    pub bootstrap: Option<Bootstrap>,
}

/// Where TLS bootstrap reads and writes (the kubelet's three flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    /// `--kubeconfig`: written when the bootstrap runs.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`: the bootstrap token's kubeconfig.
    pub bootstrap_kubeconfig: PathBuf,
    /// `--cert-dir`: where the client certificates are kept (`<rootDir>/pki` by default).
    pub cert_dir: PathBuf,
}

/// What the command line says over the configuration file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// The configuration file; the embedded default when `None`.
    pub config_file: Option<PathBuf>,
    pub node_name: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub cert_dir: Option<PathBuf>,
    pub standalone: bool,
    /// Run this many simulated nodes (a fleet).
    pub nodes: Option<u32>,
}

/// Why the settings could not be resolved. None is retryable: the input must change.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--bootstrap-kubeconfig needs --kubeconfig: the file the bootstrap writes")]
    BootstrapNeedsKubeconfig,
    #[error("--node-name: invalid value {:?}: {}", .0.value, .0.reason)]
    NodeName(#[source] InvalidSetting),
    #[error("cannot determine the node name from the host name ({0}); set nodeName or --node-name")]
    HostnameUnreadable(#[source] std::io::Error),
    #[error(
        "cannot determine the node name from the host name ({:?}: {}); set nodeName or --node-name",
        .0.value, .0.reason
    )]
    Hostname(#[source] InvalidSetting),
    #[error(
        "--nodes: a fleet of nodes in one process needs runtime: simulated in the configuration file"
    )]
    FleetNeedsSimulatedRuntime,
    #[error("--nodes: {0}")]
    FleetSize(#[from] FleetSizeError),
    #[error(transparent)]
    NotInThisBuild(#[from] NotInThisBuild),
}

impl Settings {
    /// Reads the configuration `overrides` names (or the embedded default) and applies them.
    pub fn resolve(overrides: &Overrides) -> Result<Self, SettingsError> {
        let config = match &overrides.config_file {
            Some(path) => Config::load(path)?,
            None => Config::embedded_default()?,
        };
        Self::from_config(config, overrides)
    }

    /// Applies `overrides` (all but the file) to a validated `config`.
    pub fn from_config(mut config: Config, overrides: &Overrides) -> Result<Self, SettingsError> {
        let fleet = overrides.nodes.is_some() || !config.nodes.is_empty();
        check_built(overrides.standalone, fleet)?;
        let node_name = match (&overrides.node_name, &config.node_name) {
            (Some(name), _) => {
                check_node_name(name).map_err(SettingsError::NodeName)?;
                name.clone()
            }
            (None, Some(name)) => name.clone(),
            (None, None) => host_node_name()?,
        };
        if let Some(count) = overrides.nodes {
            // Without a file, the embedded default's `runtime: cri` is nobody's choice, and a
            // fleet can only be simulated: `--nodes N` alone says enough.
            if overrides.config_file.is_none() {
                config.runtime = RuntimeKind::Simulated;
            }
            if config.runtime != RuntimeKind::Simulated {
                return Err(SettingsError::FleetNeedsSimulatedRuntime);
            }
            config.nodes = with_generated(&config.nodes, &node_name, count as usize)?;
        }
        let bootstrap = match (&overrides.bootstrap_kubeconfig, &overrides.kubeconfig) {
            (None, _) => None,
            (Some(_), None) => return Err(SettingsError::BootstrapNeedsKubeconfig),
            (Some(bootstrap), Some(kubeconfig)) => Some(Bootstrap {
                kubeconfig: kubeconfig.clone(),
                bootstrap_kubeconfig: bootstrap.clone(),
                cert_dir: overrides
                    .cert_dir
                    .clone()
                    .unwrap_or_else(|| config.root_dir_on_host().join("pki")),
            }),
        };
        Ok(Self {
            bootstrap,
            config,
            node_name,
            kubeconfig: overrides.kubeconfig.clone(),
            standalone: overrides.standalone,
        })
    }

    /// The certificate directory (the kubelet's `--cert-dir`): the one the command line names
    /// for TLS bootstrap, else `<rootDir>/pki`.
    pub fn cert_dir(&self) -> PathBuf {
        self.bootstrap
            .as_ref()
            .map_or_else(|| self.config.cert_dir_on_host(), |b| b.cert_dir.clone())
    }

    /// Whether these settings ask for a fleet rather than one node.
    pub fn is_fleet(&self) -> bool {
        !self.config.nodes.is_empty()
    }

    /// The fleet's nodes (empty for one node).
    pub fn fleet_nodes(&self) -> &[FleetNodeConfig] {
        &self.config.nodes
    }
}

/// The host name, lower-cased, as the kubelet names its Node by default.
fn host_node_name() -> Result<String, SettingsError> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map_err(SettingsError::HostnameUnreadable)?;
    let name = hostname.trim().to_lowercase();
    check_node_name(&name).map_err(SettingsError::Hostname)?;
    Ok(name)
}
