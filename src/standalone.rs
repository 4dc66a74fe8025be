//! `--standalone`: an API emulator started in this process, and a kubeconfig written for it, so
//! nodepulse (and kubectl) run on a machine with nothing else installed.

use std::{net::SocketAddr, path::PathBuf};

use nodepulse_emulator::{Emulator, EmulatorConfig, EmulatorError, EmulatorHandle};

use crate::config::StandaloneConfig;

/// The running emulator and where its kubeconfig is.
pub struct Standalone {
    pub emulator: EmulatorHandle,
    pub kubeconfig: PathBuf,
}

/// Why standalone mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("standalone.apiAddress {0:?} is not an address")]
    Address(String),
    #[error("cannot start the standalone API server: {0}")]
    Start(#[source] EmulatorError),
    #[error("cannot write the standalone kubeconfig: {0}")]
    Kubeconfig(#[source] EmulatorError),
}

/// Starts the emulator on `standalone.apiAddress` and writes its kubeconfig.
pub async fn start(config: &StandaloneConfig) -> Result<Standalone, StandaloneError> {
    let address: SocketAddr = config
        .api_address
        .parse()
        .map_err(|_| StandaloneError::Address(config.api_address.clone()))?;
    let emulator = Emulator::start(EmulatorConfig {
        address,
        ..EmulatorConfig::default()
    })
    .await
    .map_err(StandaloneError::Start)?;
    let kubeconfig = config
        .kubeconfig_path
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("nodepulse-standalone.kubeconfig"));
    emulator
        .write_kubeconfig(&kubeconfig)
        .map_err(StandaloneError::Kubeconfig)?;
    tracing::info!(api = %emulator.base_url(), kubeconfig = %kubeconfig.display(), "standalone API server running");
    // Said on stdout too: it is the one thing a person starting standalone mode needs to know.
    println!(
        "nodepulse standalone: API server at {}; try: kubectl --kubeconfig {} get nodes",
        emulator.base_url(),
        kubeconfig.display()
    );
    Ok(Standalone {
        emulator,
        kubeconfig,
    })
}
