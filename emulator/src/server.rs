//! Starting and stopping the emulator: [`Emulator::start`] binds the address, seeds the built-in
//! namespaces and the `kubernetes` Service, starts the HTTP workers and (if enabled) the node-lifecycle controller, and
//! returns an [`EmulatorHandle`]. Works inside an existing tokio or actix runtime. Serving
//! itself, outages included, is `serving`'s.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use serde_json::json;
use tokio::task::JoinHandle;

use crate::api::resource::NAMESPACES;
use crate::config::EmulatorConfig;
use crate::faults::FaultHandle;
use crate::request_log::{RequestLog, RequestRecord};
use crate::serving::{CurrentServer, Parts, serve, start_http};
use crate::store::Store;

/// Namespaces that exist from the start, as in a fresh cluster.
pub const BUILTIN_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Why the emulator could not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The address could not be bound (in use, not local, ...). Retrying with another address helps.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The kubelet client certificate could not be made (a bug, not retryable).
    #[error("{0}")]
    KubeletClient(String),
    /// The built-in namespaces could not be created (a bug, not retryable).
    #[error("cannot seed namespace {namespace}: {message}")]
    Seed { namespace: String, message: String },
    /// The CA or the TLS configuration could not be made (a bug, not retryable).
    #[error("cannot set up certificates: {0}")]
    Tls(String),
    /// Writing a kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The emulator entry point.
pub struct Emulator;

impl Emulator {
    /// Starts an emulator per `config`; it runs until [`EmulatorHandle::shutdown`] or until the
    /// handle is dropped.
    pub async fn start(config: EmulatorConfig) -> Result<EmulatorHandle, EmulatorError> {
        let listener = TcpListener::bind(config.address).map_err(|source| EmulatorError::Bind {
            address: config.address,
            source,
        })?;
        let address = listener
            .local_addr()
            .map_err(|source| EmulatorError::Bind {
                address: config.address,
                source,
            })?;
        let store = Arc::new(Store::new(config.watch.history, 4096));
        for namespace in BUILTIN_NAMESPACES {
            store
                .create(
                    &NAMESPACES,
                    json!({"metadata": {"name": namespace}}),
                    SystemTime::now(),
                )
                .map_err(|e| EmulatorError::Seed {
                    namespace: namespace.into(),
                    message: e.message,
                })?;
            crate::service_accounts::ensure_default(&store, namespace, SystemTime::now());
            crate::root_ca::publish(&store, namespace, SystemTime::now());
        }
        // The control plane's own Service, which every pod's KUBERNETES_SERVICE_* name.
        store
            .create(
                &crate::api::resource::SERVICES,
                crate::store::services::kubernetes_service(address.port()),
                SystemTime::now(),
            )
            .map_err(|e| EmulatorError::Seed {
                namespace: "default".into(),
                message: e.message,
            })?;
        let now = SystemTime::now();
        let ca = Arc::new(
            crate::certificates::authority::ClusterCa::generate(now)
                .map_err(|e| EmulatorError::Tls(e.to_string()))?,
        );
        let tls = if config.tls {
            let tls = crate::tls::server_config(&ca, now)
                .map_err(|e| EmulatorError::Tls(e.to_string()))?;
            Some(Arc::new(tls))
        } else {
            None
        };
        let faults = FaultHandle::default();
        let requests = RequestLog::default();
        let kubelet = Arc::new(
            crate::kubelet_client::KubeletClient::from_ca(&ca, now)
                .map_err(EmulatorError::KubeletClient)?,
        );
        let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
        let parts = Parts {
            store: store.clone(),
            faults: faults.clone(),
            auth: config.auth.clone(),
            watch: config.watch.clone(),
            requests: requests.clone(),
            workers: config.workers,
            kubelet: Arc::clone(&kubelet),
            kubelet_addresses: crate::kubelet_client::KubeletAddresses {
                preferred: config.kubelet_preferred_address_types.clone(),
                loopback_fallback: config.kubelet_loopback_fallback,
            },
            tls,
        };
        let (ending_tx, ending_rx) = tokio::sync::watch::channel(crate::http::Ending::Serving);
        let server = start_http(listener, &parts, ending_rx)
            .map_err(|source| EmulatorError::Bind { address, source })?;
        let current = CurrentServer::default();
        let server_task = tokio::spawn(serve(
            server,
            ending_tx,
            address,
            parts,
            Arc::clone(&current),
            shutdown_rx.clone(),
        ));
        // These end when `shutdown` flips or its sender goes with the handle.
        let _namespace_controllers =
            crate::namespace_controllers::spawn(store.clone(), shutdown_rx.clone());
        let _certificate_controllers = crate::certificates::controller::spawn(
            store.clone(),
            crate::certificates::controller::Settings {
                ca: Arc::clone(&ca),
                duration: config.cluster_signing_duration,
                node_client_requesters: config.node_client_requesters.clone(),
            },
            shutdown_rx.clone(),
        );
        let _attach_detach = config.attach_detach.enabled.then(|| {
            tokio::spawn(crate::lifecycle::attach_loop::run(
                store.clone(),
                config.attach_detach.clone(),
                shutdown_rx.clone(),
            ))
        });
        let lifecycle_task = (config.lifecycle.enabled || config.node_controllers).then(|| {
            tokio::spawn(crate::lifecycle::run(
                store.clone(),
                config.lifecycle.clone(),
                config.node_controllers,
                shutdown_rx,
            ))
        });
        tracing::info!(%address, lifecycle = config.lifecycle.enabled, node_controllers = config.node_controllers, "emulator listening");
        Ok(EmulatorHandle {
            address,
            ca,
            tls: config.tls,
            store,
            faults,
            requests,
            server: current,
            server_task: Some(server_task),
            lifecycle_task,
            shutdown: shutdown_tx,
            kubelet,
        })
    }
}

/// A running emulator. Dropping it stops the emulator without waiting.
pub struct EmulatorHandle {
    address: SocketAddr,
    /// The cluster CA: it signs CSRs and, with `tls`, the serving certificate.
    ca: Arc<crate::certificates::authority::ClusterCa>,
    tls: bool,
    store: Arc<Store>,
    faults: FaultHandle,
    requests: RequestLog,
    /// The server of the current serving period (none while an outage has it down).
    server: CurrentServer,
    server_task: Option<JoinHandle<()>>,
    lifecycle_task: Option<JoinHandle<()>>,
    shutdown: tokio::sync::watch::Sender<bool>,
    kubelet: Arc<crate::kubelet_client::KubeletClient>,
}

impl EmulatorHandle {
    /// The CA of the client certificate the emulator presents to kubelets (for their
    /// `authentication.x509.clientCAFile`), in PEM.
    pub fn kubelet_client_ca_pem(&self) -> &str {
        self.kubelet.ca_pem()
    }

    /// The bound address (the real port when configured with port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address>` (`https://` with TLS), the API server URL.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    /// The cluster CA certificate (PEM): what verifies the API server with TLS, and what
    /// issued the certificates of approved CSRs.
    pub fn ca_pem(&self) -> &str {
        self.ca.pem()
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> &FaultHandle {
        &self.faults
    }

    /// The resource requests served so far (the most recent 10,000), oldest first: who asked
    /// for what, in RBAC's terms, and the answer's status code.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.requests.snapshot()
    }

    /// Number of stored objects of a kind (for measurements and tests).
    pub fn object_count(&self, kind: crate::api::StoredKind) -> usize {
        self.store.count(kind)
    }

    /// A kubeconfig for this emulator, with `token` as bearer token when given.
    pub fn kubeconfig(&self, token: Option<&str>) -> String {
        let ca = self.tls.then(|| self.ca.pem());
        crate::kubeconfig::render_with_ca(&self.base_url(), token, ca)
    }

    /// Writes an anonymous kubeconfig to `path` (parent directories are created), mode 0600
    /// when it makes the file; a link at `path` is refused, never written through.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmulatorError> {
        self.write_kubeconfig_with_token(path, None)
    }

    /// Writes a kubeconfig authenticating with `token` to `path`.
    pub fn write_kubeconfig_with_token(
        &self,
        path: &Path,
        token: Option<&str>,
    ) -> Result<(), EmulatorError> {
        let error = |source| EmulatorError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(error)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(error)?;
        std::io::Write::write_all(&mut file, self.kubeconfig(token).as_bytes()).map_err(error)
    }

    /// Stops accepting requests, ends watches and the controller, and waits for the workers.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.server_task.take() {
            let _ = task.await;
        }
        if let Some(task) = self.lifecycle_task.take() {
            let _ = task.await;
        }
        tracing::info!(address = %self.address, "emulator stopped");
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        // `stop` sends the command eagerly; the returned future only waits for completion.
        let current = self
            .server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(server) = current {
            drop(server.stop(false));
        }
        if let Some(task) = &self.lifecycle_task {
            task.abort();
        }
    }
}
