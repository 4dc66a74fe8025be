//! `--standalone`: an API emulator started in this process, and a kubeconfig written for it, so
//! nodepulse (and kubectl) run on a machine with nothing else installed, and beside a kubelet or
//! another nodepulse: no listener needs its well-known port (`listen`). Run as root in a
//! shared temporary directory, the kubeconfig goes to a fresh private directory (mode 0700) made
//! for this instance; it is never written through a link or over an existing file.

use std::{
    fs::{DirBuilder, OpenOptions, Permissions},
    io::{self, Write},
    net::SocketAddr,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use nodepulse_emulator::{Emulator, EmulatorConfig, EmulatorError, EmulatorHandle};

use crate::{config::StandaloneConfig, listen};

/// The prefix of the private directory made under `$TMPDIR` when no path is configured.
pub const PRIVATE_DIR_PREFIX: &str = "nodepulse-standalone-";
/// The kubeconfig's name inside that directory.
pub const KUBECONFIG_NAME: &str = "kubeconfig";
/// The emulator's kubelet-client CA's name inside its own private directory.
pub const KUBELET_CLIENT_CA_NAME: &str = "kubelet-client-ca.crt";

/// The running emulator and where its kubeconfig is.
pub struct Standalone {
    pub emulator: EmulatorHandle,
    pub kubeconfig: PathBuf,
    /// The CA of the client certificate the emulator presents to the node's kubelet API (as
    /// kube-apiserver's kubelet-client certificate), for `authentication.x509.clientCAFile`;
    /// in a private directory of its own, removed at exit.
    pub kubelet_client_ca: PathBuf,
    ca_dir: PathBuf,
    /// The private directory made for the kubeconfig, when none was configured.
    private_dir: Option<PathBuf>,
}

/// Why standalone mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("standalone.apiAddress {0:?} is not an address")]
    Address(String),
    #[error("cannot start the standalone API server: {0}")]
    Start(#[source] EmulatorError),
    #[error("cannot make a private directory for the standalone kubeconfig under {}: {source}", .parent.display())]
    PrivateDir {
        parent: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Something (a file, or a link someone planted) is already at the configured path; it is
    /// never overwritten. Retrying helps once it is removed.
    #[error("standalone.kubeconfigPath {}: a file or link is already there; nodepulse writes a new kubeconfig and never overwrites one (remove it, or choose another path)", .0.display())]
    KubeconfigExists(PathBuf),
    #[error("cannot write the standalone kubeconfig {}: {source}", .path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Starts the emulator on `standalone.apiAddress` and writes its kubeconfig.
pub async fn start(config: &StandaloneConfig) -> Result<Standalone, StandaloneError> {
    let address: SocketAddr = config
        .api_address
        .parse()
        .map_err(|_| StandaloneError::Address(config.api_address.clone()))?;
    let emulator = start_emulator(address).await?;
    let (kubeconfig, private_dir) = match &config.kubeconfig_path {
        Some(path) => (path.clone(), None),
        None => {
            let dir = create_private_dir(&std::env::temp_dir())?;
            (dir.join(KUBECONFIG_NAME), Some(dir))
        }
    };
    if let Err(error) = write_new_file(&kubeconfig, emulator.kubeconfig(None).as_bytes()) {
        remove_private_dir(private_dir.as_deref());
        return Err(error);
    }
    let ca_dir = match create_private_dir(&std::env::temp_dir()) {
        Ok(dir) => dir,
        Err(error) => {
            remove_private_dir(private_dir.as_deref());
            return Err(error);
        }
    };
    let kubelet_client_ca = ca_dir.join(KUBELET_CLIENT_CA_NAME);
    if let Err(error) = write_new_file(
        &kubelet_client_ca,
        emulator.kubelet_client_ca_pem().as_bytes(),
    ) {
        remove_private_dir(private_dir.as_deref());
        remove_private_dir(Some(&ca_dir));
        return Err(error);
    }
    tracing::info!(api = %emulator.base_url(), kubeconfig = %kubeconfig.display(), "standalone API server running");
    // Said on stdout too: it is the one thing a person starting standalone mode needs to know.
    println!(
        "nodepulse standalone: API server at {}; kubeconfig (mode 0600, removed at exit) at {}; try: kubectl --kubeconfig {} get nodes",
        emulator.base_url(),
        kubeconfig.display(),
        kubeconfig.display()
    );
    Ok(Standalone {
        emulator,
        kubeconfig,
        kubelet_client_ca,
        ca_dir,
        private_dir,
    })
}

/// The emulator on `address`, or on a port of its own when that is taken (said on stdout). It
/// dials a node's kubelet API on loopback when none of the node's addresses answers: the node
/// is in this process, its name may be one nothing resolves.
async fn start_emulator(address: SocketAddr) -> Result<EmulatorHandle, StandaloneError> {
    let config = |address| EmulatorConfig {
        address,
        kubelet_loopback_fallback: true,
        ..EmulatorConfig::default()
    };
    match Emulator::start(config(address)).await {
        Err(EmulatorError::Bind { source, .. })
            if source.kind() == io::ErrorKind::AddrInUse && address.port() != 0 =>
        {
            let any_port = SocketAddr::new(address.ip(), 0);
            let emulator = Emulator::start(config(any_port))
                .await
                .map_err(StandaloneError::Start)?;
            listen::say_moved("the standalone API server", address, emulator.address());
            Ok(emulator)
        }
        started => started.map_err(StandaloneError::Start),
    }
}

impl Standalone {
    /// Stops the emulator and removes the kubeconfig written for it (and its private
    /// directory): it names an API server that no longer answers, and a configured path must be
    /// free for the next start.
    pub async fn shutdown(self) {
        self.emulator.shutdown().await;
        remove_private_dir(Some(&self.ca_dir));
        match &self.private_dir {
            Some(dir) => remove_private_dir(Some(dir)),
            None => {
                if let Err(error) = std::fs::remove_file(&self.kubeconfig) {
                    tracing::warn!(kubeconfig = %self.kubeconfig.display(), %error, "cannot remove the standalone kubeconfig");
                }
            }
        }
    }
}

/// A new directory `<parent>/nodepulse-standalone-<random>` with mode 0700. `mkdir` fails on
/// any existing name (a link included), so nothing another user prepared is ever used.
fn create_private_dir(parent: &Path) -> Result<PathBuf, StandaloneError> {
    let mut attempts = 0;
    loop {
        let dir = parent.join(format!(
            "{PRIVATE_DIR_PREFIX}{:016x}",
            rand::random::<u64>()
        ));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 100 => attempts += 1,
            Err(source) => {
                return Err(StandaloneError::PrivateDir {
                    parent: parent.to_owned(),
                    source,
                });
            }
        }
    }
}

fn remove_private_dir(dir: Option<&Path>) {
    if let Some(dir) = dir
        && let Err(error) = std::fs::remove_dir_all(dir)
    {
        tracing::warn!(directory = %dir.display(), %error, "cannot remove the standalone kubeconfig's directory");
    }
}

/// Creates `path` (its parent directories too) as a new file of mode 0600 holding `contents`:
/// `O_EXCL | O_NOFOLLOW` refuse an existing file and a link at that name alike.
fn write_new_file(path: &Path, contents: &[u8]) -> Result<(), StandaloneError> {
    let error = |source| StandaloneError::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => StandaloneError::KubeconfigExists(path.to_owned()),
            _ => error(e),
        })?;
    // The umask may have taken more than the group's and others' bits; the owner's stay.
    file.set_permissions(Permissions::from_mode(0o600))
        .map_err(error)?;
    file.write_all(contents).map_err(error)
}
