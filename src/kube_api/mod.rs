//! The API port's kube-rs adapter: how nodepulse talks to the API server.
//!
//! Two clients, as the kubelet has: the main client, rate limited with governor
//! (`kubeAPIQPS`/`kubeAPIBurst`), for registration, events and everything else; and the
//! heartbeat client for Lease and node-status calls, never rate limited, every request bounded
//! by min(`nodeStatusUpdateFrequency`, `nodeLeaseDurationSeconds`), and rebuilt on repeated
//! heartbeat failure so the next request dials afresh instead of reusing a dead connection.

mod errors;
mod lease;
mod node;
mod pods;

use std::{
    num::NonZeroU32,
    path::Path,
    sync::{Arc, RwLock},
    time::Duration,
};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use errors::timed;
pub use lease::renewal_patch;
pub use node::node_event;

use crate::config::Config;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no cluster to talk to: pass --kubeconfig, set KUBECONFIG, provide ~/.kube/config or run in a pod; or use --standalone ({0})"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot build an API client: {0}")]
    Client(#[source] kube::Error),
}

/// Both clients and the limits around them. Cheap to share behind an `Arc`.
pub struct KubeApi {
    config: kube::Config,
    /// Also carries the watches, which the rate limit does not apply to (one long request).
    main: kube::Client,
    main_limiter: Arc<DefaultDirectRateLimiter>,
    event_limiter: DefaultDirectRateLimiter,
    heartbeat: RwLock<kube::Client>,
    heartbeat_timeout: Duration,
}

impl KubeApi {
    /// Connects with `kubeconfig` when given, else as kubectl would (`KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account).
    pub async fn connect(
        kubeconfig: Option<&Path>,
        config: &Config,
    ) -> Result<Arc<Self>, ConnectError> {
        let mut client_config = match kubeconfig {
            Some(path) => {
                let kubeconfig_error = |source| ConnectError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                };
                let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
                kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                    .await
                    .map_err(kubeconfig_error)?
            }
            None => kube::Config::infer().await.map_err(ConnectError::Infer)?,
        };
        let heartbeat_timeout = config.heartbeat_timeout();
        client_config.read_timeout = Some(heartbeat_timeout);
        client_config.write_timeout = Some(heartbeat_timeout);
        client_config.connect_timeout = Some(heartbeat_timeout);
        let main = kube::Client::try_from(client_config.clone()).map_err(ConnectError::Client)?;
        let heartbeat =
            kube::Client::try_from(client_config.clone()).map_err(ConnectError::Client)?;
        let quota = |qps: u32, burst: u32| {
            let qps = NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN);
            Quota::per_second(qps).allow_burst(NonZeroU32::new(burst).unwrap_or(qps))
        };
        Ok(Arc::new(Self {
            config: client_config,
            main,
            main_limiter: Arc::new(RateLimiter::direct(quota(
                config.kube_api_qps,
                config.kube_api_burst,
            ))),
            event_limiter: RateLimiter::direct(quota(config.event_record_qps, config.event_burst)),
            heartbeat: RwLock::new(heartbeat),
            heartbeat_timeout,
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

    /// Replaces the heartbeat client, dropping its pooled connections.
    pub fn reset_heartbeat_connections(&self) {
        match kube::Client::try_from(self.config.clone()) {
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
