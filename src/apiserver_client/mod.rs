//! The API port's kube-rs adapter: how nodepulse talks to the API server.
//!
//! Two clients, as the kubelet has: the main client, rate limited with governor
//! (`kubeAPIQPS`/`kubeAPIBurst`), for registration, events and everything else; and the
//! heartbeat client for Lease and node-status calls, never rate limited, every request bounded
//! by min(`nodeStatusUpdateFrequency`, `nodeLeaseDurationSeconds`), and rebuilt on repeated
//! heartbeat failure so the next request dials afresh instead of reusing a dead connection.
//! Both send a request again when a 429 or 5xx answer carries `Retry-After`, as client-go does,
//! never past the request's own timeout (`retry_after`). Every request's outcome tells one
//! shared [`Reachability`]; while the server is unreachable a cheap probe asks it every few
//! hundred milliseconds, and its first answer wakes every watch and retry wait at once.
//! A node that joined by TLS bootstrap builds both on its [`credentials::ClientIdentity`],
//! whose certificate rotation swaps under them.

pub mod credentials;
pub mod csi_node;
mod errors;
mod events;
mod fit_lists;
mod in_flight;
pub mod lease;
pub mod metrics;
pub mod node;
mod object_watches;
mod pods;
mod reachability;
mod resume;
mod retry_after;
mod runtime_classes;
mod services;
mod shared_watch;
pub mod storage;
mod volume_sources;
mod watched_set;

use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::Duration,
};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

pub use errors::{timed, with_causes};
pub use lease::renewal_patch;
pub use node::node_event;
pub use reachability::{REMINDER_EVERY, Reachability};
pub use shared_watch::SharedWatches;
pub use volume_sources::token_request;

use crate::config::Config;

/// Why no client could be built. Retrying does not help until the file or environment changes.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot use the in-cluster service account: {0}")]
    InCluster(#[source] kube::config::InClusterError),
    #[error(
        "no cluster to talk to: pass --kubeconfig, set KUBECONFIG, provide ~/.kube/config or run in a pod; or use --standalone"
    )]
    NoCluster,
    #[error("cannot build an API client: {0}")]
    Client(#[source] kube::Error),
}

/// Where the client configuration came from, in the order kubectl looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigSource {
    /// `--kubeconfig FILE`.
    Flag(PathBuf),
    /// `KUBECONFIG`, one file or a `:`-separated list merged as kubectl merges it.
    Environment(String),
    /// `~/.kube/config`.
    Home(PathBuf),
    /// The pod's service account (`KUBERNETES_SERVICE_HOST` and its token and CA).
    InCluster,
}

impl std::fmt::Display for KubeconfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Flag(path) => write!(f, "--kubeconfig {}", path.display()),
            Self::Environment(value) => write!(f, "KUBECONFIG={value}"),
            Self::Home(path) => write!(f, "{}", path.display()),
            Self::InCluster => f.write_str("in-cluster service account"),
        }
    }
}

/// The client configuration as kubectl resolves it: `--kubeconfig`, else `KUBECONFIG`, else
/// `~/.kube/config`, else the in-cluster service account. Unlike kube-rs's `Config::infer`, a
/// kubeconfig that is named but broken is an error naming it, never a silent fall-through to
/// the next source. The cluster CA, client certificates and bearer tokens (also `tokenFile`
/// and exec plugins) come from the chosen source through kube-rs; TLS is rustls.
pub async fn client_config(
    kubeconfig: Option<&Path>,
) -> Result<(kube::Config, KubeconfigSource), ConnectError> {
    let from_file = |file: Result<Kubeconfig, _>, source: KubeconfigSource| async move {
        let error = |error| ConnectError::Kubeconfig {
            path: source.to_string(),
            source: error,
        };
        let file = file.map_err(error)?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(error)?;
        Ok((config, source))
    };
    if let Some(path) = kubeconfig {
        return from_file(
            Kubeconfig::read_from(path),
            KubeconfigSource::Flag(path.to_owned()),
        )
        .await;
    }
    if let Some(value) = std::env::var_os("KUBECONFIG").filter(|value| !value.is_empty()) {
        let source = KubeconfigSource::Environment(value.to_string_lossy().into_owned());
        let file = Kubeconfig::from_env().and_then(|file| file.ok_or(KubeconfigError::FindPath));
        return from_file(file, source).await;
    }
    let home = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".kube").join("config"))
        .filter(|path| path.exists());
    if let Some(path) = home {
        return from_file(Kubeconfig::read_from(&path), KubeconfigSource::Home(path)).await;
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        let config = kube::Config::incluster().map_err(ConnectError::InCluster)?;
        return Ok((config, KubeconfigSource::InCluster));
    }
    Err(ConnectError::NoCluster)
}

/// A client whose every request (each attempt) is timed into [`metrics::API_METRICS`], and
/// whose 429/5xx answers with `Retry-After` are retried as client-go does (`retry_after`), in
/// place of kube-rs's own retry policy; retries wait for `limiter` when given; at most
/// `in_flight` requests are in flight at once, each until its answer is read whole, when
/// given (`in_flight`).
fn timed_client(
    config: &kube::Config,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    reachability: &Arc<Reachability>,
    in_flight: Option<usize>,
    identity: Option<&Arc<credentials::ClientIdentity>>,
) -> Result<kube::Client, kube::Error> {
    let mut config = config.clone();
    config.default_retry = false;
    // Over the timing (a request's time waiting for its turn is not the server's), under the
    // retries (a request waiting out a Retry-After holds no place).
    let in_flight = in_flight::InFlightLayer::new(in_flight);
    let timing = metrics::TimingLayer {
        host: (config.cluster_url.authority())
            .map_or_else(String::new, ToString::to_string)
            .into(),
    };
    let builder = match identity {
        Some(identity) => credentials::client::builder(&config, identity)?,
        None => kube::client::ClientBuilder::try_from(config)?,
    };
    Ok(builder
        .with_layer(&timing)
        .with_layer(&in_flight)
        .with_layer(&reachability::ReachabilityLayer(Arc::clone(reachability)))
        .with_layer(&retry_after::RetryAfterLayer::new(limiter))
        .build())
}

/// How often, at most, an unreachable API server is asked whether it is back (`GET /version`,
/// jittered between half of this and this): a refused connect costs next to nothing, and the
/// answer wakes every waiting retry within this period of the server's return.
const PROBE_EVERY: Duration = Duration::from_millis(500);

/// While the server is unreachable, asks it whether it is back, so the recovery is noticed
/// even when every other retry is deep in its backoff.
async fn probe_while_unreachable(
    reachability: Arc<Reachability>,
    client: kube::Client,
    timeout: Duration,
) {
    loop {
        reachability.until_unreachable().await;
        while reachability.is_unreachable() {
            tokio::time::sleep(PROBE_EVERY.mul_f64(0.5 + 0.5 * rand::random::<f64>())).await;
            let _ = timed(timeout, client.apiserver_version()).await;
        }
    }
}

/// Both clients and the limits around them. Cheap to share behind an `Arc`.
pub struct KubeApi {
    config: kube::Config,
    /// Also carries the watches, which the rate limit does not apply to (one long request).
    main: kube::Client,
    main_limiter: Arc<DefaultDirectRateLimiter>,
    /// The Events' queues, correlators and rate limit (`events`).
    events: Arc<events::sink::EventSink>,
    heartbeat: RwLock<kube::Client>,
    heartbeat_timeout: Duration,
    /// Requests each client may have in flight (a fleet's bound; `None` for one node).
    in_flight: Option<usize>,
    /// The runtime `connect` ran on, which lives as long as the daemon. A client's tower
    /// Buffer worker is spawned on the runtime it is built on: a replacement built on an
    /// actor's arbiter would die with it (a hung actor's arbiter is retired and stopped).
    runtime: tokio::runtime::Handle,
    /// Whether the API server answers, as every request of both clients tells it.
    reachability: Arc<Reachability>,
    /// The client certificate both clients present, when the node manages one.
    identity: Option<Arc<credentials::ClientIdentity>>,
    /// The probe that notices the server's return; ends with this.
    prober: tokio::task::AbortHandle,
    /// Every Service, for service-link variables: watched from the first ask on, once for all
    /// the pods this client serves.
    services: std::sync::OnceLock<Arc<services::ServiceCache>>,
    /// Every RuntimeClass, for sandbox handlers: watched from the first ask on.
    runtime_classes: std::sync::OnceLock<Arc<runtime_classes::RuntimeClassCache>>,
    /// The ConfigMaps and Secrets pods read, each watched from its first read on (the
    /// kubelet's `Watch` strategy), once for all the pods this client serves.
    config_maps: std::sync::OnceLock<
        Arc<object_watches::ObjectWatches<k8s_openapi::api::core::v1::ConfigMap>>,
    >,
    secrets:
        std::sync::OnceLock<Arc<object_watches::ObjectWatches<k8s_openapi::api::core::v1::Secret>>>,
    /// `syncFrequency`: five of them unread make an object's watch idle.
    sync_period: Duration,
}

impl KubeApi {
    /// Connects with `kubeconfig` when given, else as kubectl would (see [`client_config`]).
    pub async fn connect(
        kubeconfig: Option<&Path>,
        config: &Config,
    ) -> Result<Arc<Self>, ConnectError> {
        Self::connect_with_identity(kubeconfig, config, None).await
    }

    /// Like [`KubeApi::connect`], presenting `identity`'s client certificate (whatever the
    /// kubeconfig's user says) when given.
    pub async fn connect_with_identity(
        kubeconfig: Option<&Path>,
        config: &Config,
        identity: Option<Arc<credentials::ClientIdentity>>,
    ) -> Result<Arc<Self>, ConnectError> {
        let (mut client_config, source) = client_config(kubeconfig).await?;
        tracing::info!(%source, server = %client_config.cluster_url, "API client configured");
        let heartbeat_timeout = config.heartbeat_timeout();
        client_config.write_timeout = Some(heartbeat_timeout);
        client_config.connect_timeout = Some(heartbeat_timeout);
        let quota = |qps: u32, burst: u32| {
            let qps = NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN);
            Quota::per_second(qps).allow_burst(NonZeroU32::new(burst).unwrap_or(qps))
        };
        let main_limiter = Arc::new(RateLimiter::direct(quota(
            config.effective_api_qps(),
            config.effective_api_burst(),
        )));
        // The main client carries the long watches, which are quiet for minutes between
        // bookmarks: it keeps kube-rs's read timeout (just above the watcher's 290 s server
        // timeout), or every watch would be cut and re-established after one heartbeat
        // timeout of silence. Its other requests are bounded one by one (`timed`).
        let reachability = Arc::new(Reachability::default());
        let in_flight = config.api_requests_in_flight();
        let main = timed_client(
            &client_config,
            Some(Arc::clone(&main_limiter)),
            &reachability,
            in_flight,
            identity.as_ref(),
        )
        .map_err(ConnectError::Client)?;
        client_config.read_timeout = Some(heartbeat_timeout);
        let heartbeat = timed_client(
            &client_config,
            None,
            &reachability,
            in_flight,
            identity.as_ref(),
        )
        .map_err(ConnectError::Client)?;
        let prober = tokio::spawn(probe_while_unreachable(
            Arc::clone(&reachability),
            heartbeat.clone(),
            heartbeat_timeout,
        ))
        .abort_handle();
        let events = Arc::new(events::sink::EventSink::new(
            RateLimiter::direct(quota(config.event_record_qps, config.event_burst)),
            main.clone(),
            Arc::clone(&main_limiter),
            heartbeat_timeout,
            tokio::runtime::Handle::current(),
        ));
        Ok(Arc::new(Self {
            config: client_config,
            main,
            main_limiter,
            events,
            heartbeat: RwLock::new(heartbeat),
            heartbeat_timeout,
            in_flight,
            runtime: tokio::runtime::Handle::current(),
            reachability,
            identity,
            prober,
            services: std::sync::OnceLock::new(),
            runtime_classes: std::sync::OnceLock::new(),
            config_maps: std::sync::OnceLock::new(),
            secrets: std::sync::OnceLock::new(),
            sync_period: config.sync_frequency.into(),
        }))
    }

    /// A future of the main client that waits for the rate limiter, owning what it needs so
    /// a `'static` request future can await it.
    pub fn main_client_handle(
        &self,
    ) -> impl std::future::Future<Output = kube::Client> + Send + 'static {
        let (limiter, client) = (Arc::clone(&self.main_limiter), self.main.clone());
        async move {
            limiter.until_ready().await;
            client
        }
    }

    /// The heartbeat client as it is now (a reset replaces it).
    pub fn heartbeat_client(&self) -> kube::Client {
        self.heartbeat.read().map_or_else(
            |poisoned| poisoned.into_inner().clone(),
            |client| client.clone(),
        )
    }

    pub fn heartbeat_timeout(&self) -> Duration {
        self.heartbeat_timeout
    }

    /// Whether the API server answers, as this process's requests tell it.
    pub fn reachability(&self) -> &Reachability {
        &self.reachability
    }

    /// Replaces the heartbeat client, dropping its pooled connections.
    pub fn reset_heartbeat_connections(&self) {
        // Built on the daemon's runtime, whichever actor's thread asks (see `runtime`).
        let rebuilt = {
            let _daemon_runtime = self.runtime.enter();
            timed_client(
                &self.config,
                None,
                &self.reachability,
                self.in_flight,
                self.identity.as_ref(),
            )
        };
        match rebuilt {
            Ok(fresh) => {
                let mut current = self
                    .heartbeat
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *current = fresh;
                tracing::info!("heartbeat failed repeatedly; its connections were reset");
            }
            Err(error) => {
                tracing::warn!(%error, "cannot rebuild the heartbeat client; keeping the old one")
            }
        }
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.prober.abort();
    }
}
