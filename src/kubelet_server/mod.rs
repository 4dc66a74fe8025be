//! The kubelet API, as kube-apiserver, metrics-server and kubectl reach a node: HTTPS on
//! `address:port` (the port `daemonEndpoints` reports) with the kubelet's authentication
//! (x509 client certificates, bearer tokens through TokenReview, anonymous off) and
//! authorization (SubjectAccessReview, or AlwaysAllow), and the plain-HTTP `/healthz` on
//! `healthzBindAddress:healthzPort`, with the kubelet 1.36's behaviour (docs/kubelet-api.md).
//!
//! Files: `tls` and `self_signed` (the serving certificate and the TLS configuration; the
//! `serverTLSBootstrap` one is the credentials module's, rotated by the daemon), `x509`,
//! `authn`, `authz`, `reviews` and `cache` (who a request is and what it may do), `server`
//! (the listeners), `routes` (one request's way), `healthz`, `logs` (`/containerLogs`),
//! `node_logs` (`/logs/`; its node log query with `node_log_query`, `go_regexp` and
//! `journal`), `pods` (`/pods`, `/runningpods/`, `/configz`), `streaming` (exec,
//! attach, port-forward, with `forwarded_ports`), `stats` (`/stats/summary`,
//! `/metrics/resource`, and the containers' cgroup collection they share with `cadvisor`),
//! `cadvisor` (`/metrics/cadvisor`), `probe_metrics` (`/metrics/probes`), `exposition` (the
//! Prometheus text the metrics paths write), `reply`, `metrics`.

mod authn;
mod authz;
mod cache;
mod cadvisor;
mod exposition;
mod forwarded_ports;
mod go_regexp;
mod healthz;
mod journal;
mod kubelet_metrics;
mod logs;
pub mod metrics;
mod node_log_query;
mod node_logs;
mod pods;
mod probe_metrics;
mod reply;
mod request_fuzzing;
pub mod reviews;
mod routes;
mod run;
pub mod self_signed;
mod server;
mod stats;
mod streaming;
pub mod tls;
mod x509;

use std::{net::SocketAddr, sync::Arc};

use nodepulse_actors::{
    eviction::PodStorageCache, pods::PodsView, prober::ProbeResults, volume_manager::VolumeView,
};
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;

pub use healthz::Problems;
#[doc(hidden)]
pub use request_fuzzing::read_request_target;
pub use reviews::Reviews;
pub use tls::TlsError;

use crate::{
    apiserver_client::credentials::ServingIdentity,
    config::{AuthorizationMode, Settings},
    host::HostProbe,
    listen::WhenTaken,
};
use nodepulse_cri::client::CriClient;

/// Why the kubelet API cannot start. None is retried: the configuration, the files or the
/// port's other user must change.
#[derive(Debug, thiserror::Error)]
pub enum KubeletApiError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot serve the kubelet API on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What every request reads.
pub struct ApiState {
    node_name: String,
    authenticator: authn::Authenticator,
    authorizer: authz::Authorizer,
    /// The node's problems for the `syncloop` check; `None` serves only `ping`.
    problems: Option<Problems>,
    /// The pods the node runs, for logs.
    pods: PodsView,
    /// The effective configuration as JSON without its secrets, for `/configz`.
    config: serde_json::Value,
    /// The node's CRI client, for exec, attach, port-forward and the containers' stats.
    runtime: Option<CriClient>,
    /// The host's readers, for the node's own stats.
    host: HostProbe,
    /// The node's CPU time at the previous scrape, for its rate.
    node_cpu: stats::CpuRate,
    /// The system containers' cgroups, for the summary.
    system: stats::SystemContainers,
    /// The containers' cgroups, collected once a housekeeping period for every reader.
    containers: stats::ContainerCollector,
    /// The mounted claims' figures for `/metrics`, measured once a `volumeStatsAggPeriod`.
    volume_stats: stats::VolumeStatsCache,
    /// The machine's facts for `/metrics/cadvisor`, read once.
    machine: cadvisor::MachineCache,
    /// The volume manager's view (the pods bound here and their mounted volumes), when the
    /// node runs pods.
    volumes: Option<VolumeView>,
    /// The prober's results, for `/metrics/probes`.
    probes: Option<ProbeResults>,
    /// `enableSystemLogQuery`: `/logs/` answers its query.
    system_log_query: bool,
}

/// The listeners bound and the TLS configuration loaded: everything that can fail at start,
/// done before the node's actors start.
pub struct Prepared {
    settings: Settings,
    tls: Arc<rustls::ServerConfig>,
    /// Under `serverTLSBootstrap`: the certificate the listener serves, for rotation to keep.
    serving: Option<Arc<ServingIdentity>>,
    client_ca: Option<x509::ClientCa>,
    listener: std::net::TcpListener,
    healthz: Option<std::net::TcpListener>,
}

/// What the running API reads from the node.
pub struct Parts {
    pub reviews: Arc<dyn Reviews>,
    pub problems: Option<Problems>,
    pub pods: PodsView,
    pub runtime: Option<CriClient>,
    pub volumes: Option<VolumeView>,
    pub probes: Option<ProbeResults>,
    /// Where the pods' measured storage goes for the eviction manager, when it evicts.
    pub pod_storage: Option<PodStorageCache>,
}

/// The running API; [`KubeletApi::stop`] stops accepting (streams in flight run on).
pub struct KubeletApi {
    pub address: SocketAddr,
    pub healthz_address: Option<SocketAddr>,
    stops: [Arc<Notify>; 2],
}

impl KubeletApi {
    pub fn stop(&self) {
        for stop in &self.stops {
            stop.notify_one();
        }
    }
}

/// A listener for `what` on `address` (in standalone mode, on a port of its own when that is
/// taken).
fn bind(
    what: &str,
    address: SocketAddr,
    when_taken: WhenTaken,
) -> Result<std::net::TcpListener, KubeletApiError> {
    let bound = crate::listen::bind(what, address, when_taken).and_then(|listener| {
        // Non-blocking, as tokio needs it when the server adopts the socket.
        listener.set_nonblocking(true)?;
        Ok(listener)
    });
    bound.map_err(|source| KubeletApiError::Bind { address, source })
}

/// Loads the TLS material and binds both listeners; in standalone mode a taken port gives way
/// to one of the kernel's choosing (said on stdout), which `daemonEndpoints` then reports.
pub fn prepare(settings: &Settings) -> Result<Prepared, KubeletApiError> {
    let config = &settings.config;
    let client_ca = match &config.authentication.x509.client_ca_file {
        Some(path) => Some(x509::ClientCa::read(path)?),
        None => None,
    };
    // The kubelet names its self-signed certificate after its hostname, which
    // `--hostname-override` (the node name here) replaces.
    let host = settings.node_name.to_lowercase();
    let serving = tls::serving_certificate(settings, &host)?;
    let rotated = match &serving {
        tls::Serving::Rotated(identity) => Some(Arc::clone(identity)),
        tls::Serving::Fixed(_) => None,
    };
    let tls = tls::server_config(config, serving, client_ca.as_ref())?;
    // Validated as IPs with the rest of the configuration.
    let ip = |text: &str| {
        text.parse()
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into())
    };
    let when_taken = WhenTaken::for_standalone(settings.standalone);
    let listener = bind(
        "the kubelet API",
        SocketAddr::new(ip(&config.address), config.port),
        when_taken,
    )?;
    let healthz = match config.healthz_port {
        0 => None,
        port => Some(bind(
            "the kubelet API's healthz",
            SocketAddr::new(ip(&config.healthz_bind_address), port),
            when_taken,
        )?),
    };
    Ok(Prepared {
        settings: settings.clone(),
        tls,
        serving: rotated,
        client_ca,
        listener,
        healthz,
    })
}

impl Prepared {
    /// The HTTPS port bound (the configured one, or the kernel's pick for `port: 0`).
    pub fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map_or(self.settings.config.port, |address| address.port())
    }

    /// The serving certificate rotation keeps (`serverTLSBootstrap: true`), if any.
    pub fn serving_identity(&self) -> Option<Arc<ServingIdentity>> {
        self.serving.clone()
    }

    /// Serves on the current tokio runtime.
    pub fn serve(self, parts: Parts) -> Result<KubeletApi, KubeletApiError> {
        let config = &self.settings.config;
        let authentication = &config.authentication;
        let authenticator = authn::Authenticator {
            client_ca: self.client_ca,
            tokens: authentication.webhook.enabled.then(|| authn::TokenWebhook {
                reviews: Arc::clone(&parts.reviews),
                ttl: authentication.webhook.cache_ttl.0,
                cache: cache::ReviewCache::default(),
            }),
            anonymous: authentication.anonymous.enabled,
        };
        let authorizer = match config.authorization.mode {
            AuthorizationMode::AlwaysAllow => authz::Authorizer::AlwaysAllow,
            AuthorizationMode::Webhook => authz::Authorizer::Webhook(authz::AccessWebhook {
                reviews: parts.reviews,
                allowed_ttl: config.authorization.webhook.cache_authorized_ttl.0,
                denied_ttl: config.authorization.webhook.cache_unauthorized_ttl.0,
                cache: cache::ReviewCache::default(),
            }),
        };
        let state = Arc::new(ApiState {
            node_name: self.settings.node_name.clone(),
            authenticator,
            authorizer,
            problems: parts.problems,
            pods: parts.pods,
            config: config.published(),
            runtime: parts.runtime,
            host: HostProbe::configured(config),
            node_cpu: stats::CpuRate::default(),
            system: stats::SystemContainers::new(config, jiff::Timestamp::now()),
            containers: stats::ContainerCollector::new(
                HostProbe::configured(config),
                config.housekeeping_interval.0,
            ),
            machine: cadvisor::MachineCache::new(),
            volume_stats: stats::VolumeStatsCache::new(config.volume_stats_agg_period.0),
            volumes: parts.volumes,
            probes: parts.probes,
            system_log_query: config.enable_system_log_query,
        });
        if let Some(cache) = parts.pod_storage {
            tokio::spawn(stats::eviction_storage::refresh(
                Arc::downgrade(&state),
                cache,
                config.housekeeping_interval.0,
            ));
        }
        let adopt = |listener: std::net::TcpListener| {
            let address = listener.local_addr();
            tokio::net::TcpListener::from_std(listener).and_then(|adopted| Ok((address?, adopted)))
        };
        let unbound = |source| KubeletApiError::Bind {
            address: SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), config.port),
            source,
        };
        let stops = [Arc::new(Notify::new()), Arc::new(Notify::new())];
        let (address, listener) = adopt(self.listener).map_err(unbound)?;
        tokio::spawn(server::serve_tls(
            listener,
            TlsAcceptor::from(self.tls),
            state,
            Arc::clone(&stops[0]),
        ));
        let healthz_address = match self.healthz {
            Some(healthz) => {
                let (address, listener) = adopt(healthz).map_err(unbound)?;
                tokio::spawn(server::serve_healthz(listener, Arc::clone(&stops[1])));
                Some(address)
            }
            None => None,
        };
        tracing::info!(%address, healthz = ?healthz_address, "kubelet API listening");
        Ok(KubeletApi {
            address,
            healthz_address,
            stops,
        })
    }
}
