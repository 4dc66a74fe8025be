//! The daemon's one run, for one node or a fleet: start the nodes' supervisors and the debug
//! endpoint, then wait for a shutdown signal or an escalation, stop everything and say how it
//! ended.

use std::{future::Future, net::SocketAddr, time::Duration};

use nodepulse_supervisor::{Escalation, SupervisorHandle};
use prometheus_client::registry::Registry;

use crate::{
    apiserver_client::{
        ConnectError, KubeApi,
        credentials::{
            self, BootstrapError, CertificateStore, ClientIdentity, Purpose, Rotation,
            rotation::Rotated,
        },
        metrics::API_METRICS,
    },
    config::{NotInThisBuild, RuntimeKind, Settings, check_built},
    debug, heap,
    kubelet_server::{self, KubeletApiError, metrics::KUBELET_API_METRICS},
    listen::{self, WhenTaken},
    node::{NodeActors, NodeHandle},
};
#[cfg(feature = "standalone")]
use crate::{
    config::DEFAULT_KUBELET_ADDRESS,
    fleet::{Fleet, FleetOptions},
    standalone::{self, StandaloneError},
};

/// Exit code for a configuration or command-line error (clap uses 2 for usage errors too).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code when a supervisor escalated, so the service manager restarts the daemon.
pub const EXIT_ESCALATED: u8 = 3;
/// Exit code when the daemon could not run (for example, the debug address is taken).
pub const EXIT_FAILED: u8 = 1;

/// How long the actors get to finish their work at shutdown.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Asked to stop, and stopped.
    Stopped,
    Escalated(Escalation),
    Failed(RunError),
}

/// Why the daemon could not run. None is retried: the service manager restarts it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("debug.address {0:?} is not an address")]
    DebugAddress(String),
    #[error("cannot serve the debug endpoint on {address}: {source}")]
    DebugEndpoint {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[cfg(feature = "standalone")]
    #[error(transparent)]
    Standalone(#[from] StandaloneError),
    #[error(transparent)]
    NotInThisBuild(#[from] NotInThisBuild),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    KubeletApi(#[from] KubeletApiError),
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error(
        "the client certificate expired and no new one could be had while the API server answers; a restart bootstraps again (with --bootstrap-kubeconfig)"
    )]
    CertificateExpired,
}

impl Outcome {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Stopped => 0,
            Self::Escalated(_) => EXIT_ESCALATED,
            Self::Failed(_) => EXIT_FAILED,
        }
    }

    /// The line printed to stderr as the process exits; none for a clean stop.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Stopped => None,
            Self::Escalated(escalation) => {
                Some(format!("nodepulse: supervisor escalated: {escalation}"))
            }
            Self::Failed(reason) => Some(format!("nodepulse: {reason}")),
        }
    }
}

/// Prints how the run ended (nothing for a clean stop) and returns the process exit code.
pub fn report(outcome: &Outcome) -> u8 {
    if let Some(message) = outcome.message() {
        eprintln!("{message}");
    }
    outcome.exit_code()
}

/// Runs `settings`' node, or fleet, until `shutdown` resolves or the node's supervisor
/// escalates: the standalone API server when asked for, the API client, the actors and the
/// debug endpoint. Must run inside an actix `System`.
pub async fn run(settings: Settings, shutdown: impl Future<Output = ()>) -> Outcome {
    // Resolved settings were checked already; these may have been made by hand.
    if let Err(refused) = check_built(settings.standalone, settings.is_fleet()) {
        return Outcome::Failed(refused.into());
    }
    #[cfg(feature = "standalone")]
    if settings.standalone {
        return run_standalone(settings, shutdown).await;
    }
    run_node_or_fleet(settings, shutdown).await
}

/// [`run`] against the API emulator started in this process, stopped (and its kubeconfig
/// removed) however the run ends.
#[cfg(feature = "standalone")]
async fn run_standalone(mut settings: Settings, shutdown: impl Future<Output = ()>) -> Outcome {
    let standalone = match standalone::start(&settings.config.standalone).await {
        Ok(standalone) => standalone,
        Err(error) => return Outcome::Failed(error.into()),
    };
    settings.kubeconfig = Some(standalone.kubeconfig.clone());
    // The emulator reaches the kubelet API as kube-apiserver does, with a client certificate
    // of its own CA; trust it unless a CA is configured.
    let x509 = &mut settings.config.authentication.x509;
    if x509.client_ca_file.is_none() {
        x509.client_ca_file = Some(standalone.kubelet_client_ca.clone());
    }
    // The emulator is in this process: the kubelet API need not be reachable from elsewhere
    // (the emulator dials loopback when the node's addresses fail).
    if settings.config.address == DEFAULT_KUBELET_ADDRESS {
        settings.config.address = std::net::Ipv4Addr::LOCALHOST.to_string();
    }
    let outcome = run_node_or_fleet(settings, shutdown).await;
    // On every outcome: its kubeconfig names an API server that is going away.
    standalone.shutdown().await;
    outcome
}

/// [`run`] once the API server is known: the client identity, the connection, then the node
/// (with the kubelet API when it runs containers) or the fleet.
async fn run_node_or_fleet(settings: Settings, shutdown: impl Future<Output = ()>) -> Outcome {
    let identity = match &settings.bootstrap {
        Some(paths) => {
            let rotate = settings.config.rotate_certificates;
            match credentials::ensure_client_certificate(paths, &settings.node_name, rotate).await {
                Ok(identity) => Some(identity),
                Err(error) => return Outcome::Failed(error.into()),
            }
        }
        None => None,
    };
    let connected = KubeApi::connect_with_identity(
        settings.kubeconfig.as_deref(),
        &settings.config,
        identity.clone(),
    )
    .await;
    match connected {
        Ok(api) => {
            let mut rotation = identity
                .filter(|_| settings.config.rotate_certificates)
                .map(|identity| start_rotation(&settings, &api, identity));
            let expired = std::sync::atomic::AtomicBool::new(false);
            let stop = async {
                let expiry = async {
                    match rotation.as_mut() {
                        Some(task) => drop(task.await),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = shutdown => {}
                    () = expiry => expired.store(true, std::sync::atomic::Ordering::SeqCst),
                }
            };
            let outcome = if settings.is_fleet() {
                run_fleet(&settings, api, stop).await
            } else if settings.config.runtime == RuntimeKind::Cri && settings.config.enable_server {
                run_node_with_kubelet_api(settings.clone(), api, stop).await
            } else {
                let node = NodeActors::new(&settings).api(api).start();
                // The whole node with an API: nothing for the wiring to refuse.
                let start = || Running::Node(Box::new(node.expect("a whole node is wired")));
                serve(&settings, start, stop).await
            };
            if let Some(rotation) = &rotation {
                rotation.abort();
            }
            if expired.load(std::sync::atomic::Ordering::SeqCst) {
                return Outcome::Failed(RunError::CertificateExpired);
            }
            outcome
        }
        Err(error) => Outcome::Failed(error.into()),
    }
}

/// The simulated fleet of `settings` on `api`, under the debug endpoint.
#[cfg(feature = "standalone")]
async fn run_fleet(
    settings: &Settings,
    api: std::sync::Arc<KubeApi>,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let start = || Running::Fleet(Fleet::start(settings, api, &FleetOptions::default()));
    serve(settings, start, shutdown).await
}

/// A build without the fleet simulator refused the fleet in [`run`]; never reached.
#[cfg(not(feature = "standalone"))]
async fn run_fleet(
    _: &Settings,
    _: std::sync::Arc<KubeApi>,
    _: impl Future<Output = ()>,
) -> Outcome {
    Outcome::Failed(NotInThisBuild::Fleet.into())
}

/// A node that runs containers, with the kubelet API beside it: its TLS material and
/// listeners first (a bad certificate or a taken port stops the run before any actor starts),
/// then the actors, told the port actually bound (`port: 0` picks one), then the API.
async fn run_node_with_kubelet_api(
    mut settings: Settings,
    api: std::sync::Arc<KubeApi>,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let prepared = match kubelet_server::prepare(&settings) {
        Ok(prepared) => prepared,
        Err(error) => return Outcome::Failed(error.into()),
    };
    settings.config.port = prepared.port();
    let node = NodeActors::new(&settings).api(api.clone()).start();
    // The whole node with an API: nothing for the wiring to refuse.
    let node = node.expect("a whole node is wired");
    let watched = node.supervisor.clone();
    let serving_rotation = prepared.serving_identity().map(|identity| {
        let view = std::sync::Arc::clone(&node.views.node);
        let addresses = std::sync::Arc::new(move || {
            view.get()
                .and_then(|node| node.status.as_ref()?.addresses.clone())
                .unwrap_or_default()
        });
        tokio::spawn(
            Rotation {
                api: std::sync::Arc::clone(&api),
                certificate: Rotated::Serving {
                    identity,
                    addresses,
                },
                store: CertificateStore::for_purpose(settings.cert_dir(), Purpose::Serving),
                node_name: settings.node_name.clone(),
                bootstrap_kubeconfig: None,
                server_responsive: std::sync::atomic::AtomicBool::new(false),
            }
            .run(),
        )
    });
    let parts = kubelet_server::Parts {
        reviews: api,
        problems: Some(std::sync::Arc::new(move || watched.problems())),
        pods: node.views.pods.clone(),
        runtime: node.runtime.clone(),
        volumes: node.views.volumes.clone(),
        probes: node.views.probes.clone(),
        pod_storage: Some(node.views.pod_storage.clone()),
    };
    let kubelet = match prepared.serve(parts) {
        Ok(kubelet) => kubelet,
        Err(error) => {
            node.supervisor.shutdown(SHUTDOWN_DEADLINE).await;
            return Outcome::Failed(error.into());
        }
    };
    let outcome = serve(&settings, || Running::Node(Box::new(node)), shutdown).await;
    kubelet.stop();
    if let Some(rotation) = serving_rotation {
        rotation.abort();
    }
    outcome
}

/// Rotates the client certificate on the daemon's runtime until the run ends; the task ends
/// by itself only when the certificate expired while the API server answers.
fn start_rotation(
    settings: &Settings,
    api: &std::sync::Arc<KubeApi>,
    identity: std::sync::Arc<ClientIdentity>,
) -> tokio::task::JoinHandle<()> {
    let bootstrap = settings.bootstrap.as_ref();
    let rotation = Rotation {
        api: std::sync::Arc::clone(api),
        certificate: Rotated::Client(identity),
        store: CertificateStore::new(settings.cert_dir()),
        node_name: settings.node_name.clone(),
        bootstrap_kubeconfig: bootstrap.map(|b| b.bootstrap_kubeconfig.clone()),
        server_responsive: std::sync::atomic::AtomicBool::new(false),
    };
    tokio::spawn(rotation.run())
}

/// What runs under the debug endpoint.
pub enum Running {
    /// One node: its supervisor's escalation ends the run (exit 3), so the service manager
    /// restarts the daemon. Its handle is kept for the services that read its views.
    Node(Box<NodeHandle>),
    /// A supervisor of the caller's own making, run and ended as one node is.
    Supervisor(SupervisorHandle),
    /// Many simulated nodes: one that escalates stays stopped and says so at the endpoint;
    /// the others run on, as they would on separate machines.
    #[cfg(feature = "standalone")]
    Fleet(Fleet),
}

impl Running {
    fn handles(&self) -> Vec<SupervisorHandle> {
        match self {
            Self::Node(node) => vec![node.supervisor.clone()],
            Self::Supervisor(supervisor) => vec![supervisor.clone()],
            #[cfg(feature = "standalone")]
            Self::Fleet(fleet) => fleet.handles().to_vec(),
        }
    }

    /// Resolves when the run must end for an escalation; never for a fleet.
    async fn escalated(&self) -> Escalation {
        match self {
            Self::Node(node) => node.supervisor.escalated().await,
            Self::Supervisor(supervisor) => supervisor.escalated().await,
            #[cfg(feature = "standalone")]
            Self::Fleet(fleet) => {
                for handle in fleet.handles() {
                    let handle = handle.clone();
                    actix_rt::spawn(async move {
                        let escalation = handle.escalated().await;
                        tracing::error!(node = %handle.node(), "{escalation}; this node stays stopped, the fleet runs on");
                    });
                }
                std::future::pending().await
            }
        }
    }

    /// Stops every node at once; whether all stopped before `deadline`.
    async fn shutdown(&self, deadline: Duration) -> bool {
        let stops = self
            .handles()
            .into_iter()
            .map(|node| async move { node.shutdown(deadline).await });
        futures::future::join_all(stops)
            .await
            .into_iter()
            .all(|stopped| stopped)
    }
}

/// Starts what `start` returns and the debug endpoint, and runs until `shutdown` resolves or
/// a node escalates (see [`Running`]). The debug address is checked before anything starts.
/// Must run inside an actix `System`.
pub async fn serve(
    settings: &Settings,
    start: impl FnOnce() -> Running,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let config = &settings.config;
    let Ok(debug_address) = config.debug.address.parse::<SocketAddr>() else {
        return Outcome::Failed(RunError::DebugAddress(config.debug.address.clone()));
    };
    let running = start();
    let gate = debug::FaultInjectionGate::new(
        config.debug.fault_injection.enabled,
        config.debug.fault_injection.token.clone(),
    );
    let mut registry = Registry::default();
    API_METRICS.register(&mut registry);
    KUBELET_API_METRICS.register(&mut registry);
    let node_facts: debug::NodeFacts = Box::new(|| {
        let since = API_METRICS
            .unreachable_since()
            .map(|since| since.to_string());
        serde_json::Map::from_iter([("apiUnreachableSince".to_owned(), since.into())])
    });
    let extras = debug::Extras {
        registry,
        node_facts: Some(node_facts),
    };
    let when_taken = WhenTaken::for_standalone(settings.standalone);
    let endpoint = listen::bind("the debug endpoint", debug_address, when_taken)
        .and_then(|listener| debug::serve(listener, running.handles(), gate, extras));
    let endpoint = match endpoint {
        Ok(endpoint) => endpoint,
        Err(source) => {
            running.shutdown(SHUTDOWN_DEADLINE).await;
            return Outcome::Failed(RunError::DebugEndpoint {
                address: debug_address,
                source,
            });
        }
    };
    let debug_server = endpoint.server.handle();
    actix_rt::spawn(endpoint.server);
    let _trimming = heap::start_trimming();
    match &running {
        Running::Node(_) | Running::Supervisor(_) => {
            tracing::info!(node = %settings.node_name, debug = %endpoint.address, "nodepulse is running");
        }
        #[cfg(feature = "standalone")]
        Running::Fleet(fleet) => {
            tracing::info!(nodes = fleet.handles().len(), debug = %endpoint.address, "nodepulse fleet is running");
        }
    }

    let outcome = tokio::select! {
        () = shutdown => Outcome::Stopped,
        escalation = running.escalated() => Outcome::Escalated(escalation),
    };
    if matches!(outcome, Outcome::Stopped) {
        tracing::info!("shutting down");
    }
    if !running.shutdown(SHUTDOWN_DEADLINE).await {
        tracing::warn!(deadline = ?SHUTDOWN_DEADLINE, "some actors did not stop before the deadline");
    }
    debug_server.stop();
    outcome
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C). The handlers are installed when this is called,
/// not when the future is first polled: that is only once the node runs, and a signal that
/// came earlier (a service manager stopping a daemon still starting) would take the default
/// action and kill the process with its standalone kubeconfig and pods' state left behind.
/// Call it first thing on the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())
        .inspect_err(|error| tracing::warn!(%error, "cannot listen for SIGTERM"))
        .ok();
    let mut interrupt = signal(SignalKind::interrupt())
        .inspect_err(|error| tracing::warn!(%error, "cannot listen for SIGINT"))
        .ok();
    async move {
        tokio::select! {
            () = received(terminate.as_mut()) => {}
            () = received(interrupt.as_mut()) => {}
        }
    }
}

/// Resolves when `signal` is received; never without a handler.
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => drop(signal.recv().await),
        None => std::future::pending().await,
    }
}
