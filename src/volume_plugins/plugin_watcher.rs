//! The kubelet's plugin watcher and its reconciler for CSI drivers: every second it lists the
//! unix sockets under `<rootDir>/plugins_registry` (polled: no inotify crate is in the tree, and
//! the kubelet's reconciler runs at 1 s anyway), deregisters the drivers whose socket vanished
//! or was replaced, and registers new sockets: GetInfo, validation, the CSI handler, then
//! NotifyRegistrationStatus with the kubelet's texts. A plain task the node's supervisor starts.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use crate::volume_plugins::csi::{
    CsiRegistrationHandler, RegistrationError,
    grpc::CsiGrpc,
    registration_proto::{self as proto, CSI_PLUGIN_TYPE, paths},
};

/// How often the reconciler looks (the kubelet's `loopSleepDuration`).
pub const RECONCILE_PERIOD: Duration = Duration::from_secs(1);
/// GetInfo's timeout, and NotifyRegistrationStatus's (the kubelet's 1 s and 5 s; the dial, 10 s in
/// the kubelet, is a local connect that cannot take long).
const GET_INFO_TIMEOUT: Duration = Duration::from_secs(1);
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a plugin was not registered, in the plugin manager's words (also told to the plugin).
/// The next pass tries again.
#[derive(Debug, thiserror::Error)]
enum PluginError {
    #[error(
        "RegisterPlugin error -- no handler registered for plugin type: {plugin_type} at socket {}",
        .socket.display()
    )]
    Type {
        plugin_type: String,
        socket: PathBuf,
    },
    #[error(
        "RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver {driver} at endpoint {endpoint}: {source}"
    )]
    Validation {
        driver: String,
        endpoint: String,
        #[source]
        source: RegistrationError,
    },
    #[error("RegisterPlugin error -- plugin registration failed with err: {0}")]
    Registration(#[source] RegistrationError),
}

/// Which socket file this is: a socket removed and made again at the same path is a new one
/// (the kubelet gives every create event a fresh UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SocketIdentity {
    dev: u64,
    ino: u64,
    ctime_ns: i128,
}

#[derive(Debug, Clone)]
struct Registered {
    identity: SocketIdentity,
    driver: String,
}

/// The watcher for one node's `plugins_registry`.
pub struct PluginWatcher {
    registry: PathBuf,
    handler: CsiRegistrationHandler,
    registered: BTreeMap<PathBuf, Registered>,
}

impl PluginWatcher {
    /// Watches `<root_dir>/plugins_registry`.
    pub fn new(root_dir: &Path, handler: CsiRegistrationHandler) -> Self {
        Self {
            registry: root_dir.join("plugins_registry"),
            handler,
            registered: BTreeMap::new(),
        }
    }

    pub fn registry(&self) -> &Path {
        &self.registry
    }

    /// Runs until `shutdown` resolves, then deregisters nothing: the drivers stay in the API
    /// objects, as when the kubelet stops.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        if let Err(error) = self.ensure_registry() {
            tracing::warn!(registry = %self.registry.display(), %error, "cannot create the plugin registry");
        }
        tokio::pin!(shutdown);
        loop {
            self.reconcile().await;
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(RECONCILE_PERIOD) => {}
            }
        }
    }

    /// `<rootDir>/plugins_registry`, mode 0755 as the kubelet makes it.
    pub fn ensure_registry(&self) -> std::io::Result<()> {
        fs::create_dir_all(&self.registry)?;
        fs::set_permissions(&self.registry, fs::Permissions::from_mode(0o755))
    }

    /// One pass: deregister what went, register what came.
    pub async fn reconcile(&mut self) {
        let found = sockets_under(&self.registry);
        let gone: Vec<PathBuf> = self
            .registered
            .iter()
            .filter(|(path, registered)| found.get(*path) != Some(&registered.identity))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            if let Some(registered) = self.registered.remove(&path) {
                tracing::info!(driver = %registered.driver, socket = %path.display(), "deregistering CSI driver");
                self.handler.deregister(&registered.driver).await;
            }
        }
        for (path, identity) in found {
            if self.registered.contains_key(&path) {
                continue;
            }
            if let Some(driver) = self.register(&path).await {
                self.registered
                    .insert(path, Registered { identity, driver });
            }
        }
    }

    /// Registers the plugin at `socket`; its driver name when it is registered. A failure is
    /// told to the plugin and tried again on the next pass, as the kubelet's reconciler does.
    async fn register(&self, socket: &Path) -> Option<String> {
        let client = CsiGrpc::new(&socket.display().to_string());
        let info: proto::PluginInfo = match client
            .unary(paths::GET_INFO, proto::InfoRequest {}, GET_INFO_TIMEOUT)
            .await
        {
            Ok(info) => info,
            Err(error) => {
                tracing::debug!(socket = %socket.display(), %error, "GetInfo failed; trying again next pass");
                return None;
            }
        };
        let outcome = self.register_plugin(socket, &info).await;
        let status = proto::RegistrationStatus {
            plugin_registered: outcome.is_ok(),
            error: (outcome.as_ref().err())
                .map(ToString::to_string)
                .unwrap_or_default(),
        };
        let notified: Result<proto::RegistrationStatusResponse, _> = client
            .unary(paths::NOTIFY_REGISTRATION_STATUS, status, NOTIFY_TIMEOUT)
            .await;
        match (outcome, notified) {
            (Ok(()), Ok(_)) => {
                tracing::info!(driver = %info.name, socket = %socket.display(), "registered CSI driver");
                Some(info.name)
            }
            (Ok(()), Err(error)) => {
                tracing::warn!(driver = %info.name, "RegisterPlugin error -- failed to send registration status at socket {}, err: {error}", socket.display());
                Some(info.name)
            }
            (Err(error), _) => {
                tracing::warn!(socket = %socket.display(), %error, "plugin not registered");
                None
            }
        }
    }

    /// The plugin manager's checks around the CSI handler, with its texts.
    async fn register_plugin(
        &self,
        socket: &Path,
        info: &proto::PluginInfo,
    ) -> Result<(), PluginError> {
        if info.r#type != CSI_PLUGIN_TYPE {
            return Err(PluginError::Type {
                plugin_type: info.r#type.clone(),
                socket: socket.to_owned(),
            });
        }
        let endpoint = if info.endpoint.is_empty() {
            socket.display().to_string()
        } else {
            info.endpoint.clone()
        };
        self.handler
            .validate("ValidatePlugin", &info.name, &info.supported_versions)
            .map_err(|source| PluginError::Validation {
                driver: info.name.clone(),
                endpoint: endpoint.clone(),
                source,
            })?;
        self.handler
            .register(&info.name, &endpoint, &info.supported_versions)
            .await
            .map(|_| ())
            .map_err(PluginError::Registration)
    }
}

/// Every unix socket under `dir`, recursively, whose name does not start with `.`.
fn sockets_under(dir: &Path) -> BTreeMap<PathBuf, SocketIdentity> {
    let mut found = BTreeMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            continue;
        };
        if metadata.is_dir() {
            found.extend(sockets_under(&path));
        } else if metadata.file_type().is_socket() {
            let identity = SocketIdentity {
                dev: metadata.dev(),
                ino: metadata.ino(),
                ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                    + i128::from(metadata.ctime_nsec()),
            };
            found.insert(path, identity);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sockets_not_starting_with_a_dot_are_candidates_at_any_depth() {
        let dir = tempfile::tempdir().expect("dir");
        let nested = dir.path().join("vendor");
        fs::create_dir(&nested).expect("nested");
        let _a = std::os::unix::net::UnixListener::bind(dir.path().join("a-reg.sock")).expect("a");
        let _b = std::os::unix::net::UnixListener::bind(nested.join("b-reg.sock")).expect("b");
        let _hidden =
            std::os::unix::net::UnixListener::bind(dir.path().join(".c.sock")).expect("c");
        fs::write(dir.path().join("notes.txt"), "not a socket").expect("file");
        let found: Vec<PathBuf> = sockets_under(dir.path()).into_keys().collect();
        assert_eq!(
            found,
            [dir.path().join("a-reg.sock"), nested.join("b-reg.sock")]
        );
    }
}
