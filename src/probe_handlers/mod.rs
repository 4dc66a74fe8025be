//! The prober's handlers: [`ProbeHandlers`] implements the actors' `ProbeRunner` port with the
//! kubelet's four mechanisms — `exec` through the `ContainerRuntime` port, `httpGet` (http and
//! https without verification), `tcpSocket` and `grpc` — each bounded by `timeoutSeconds`.

mod exec;
mod grpc;
mod http;
mod tcp;
mod tls;

#[cfg(test)]
mod grpc_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;

use std::sync::Arc;

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::ports::{
    ContainerRuntime, ProbeAction, ProbeError, ProbeOutcome, ProbeRunner, ProbeTarget,
};

pub use self::http::{MAX_BODY_BYTES, USER_AGENT};

/// Runs probes for real: exec in the runtime, network probes from the node to the pod.
#[derive(Clone)]
pub struct ProbeHandlers {
    runtime: Arc<dyn ContainerRuntime>,
}

impl ProbeHandlers {
    pub fn new(runtime: Arc<dyn ContainerRuntime>) -> Self {
        Self { runtime }
    }
}

impl ProbeRunner for ProbeHandlers {
    fn run(&self, target: ProbeTarget) -> BoxFuture<'static, ProbeOutcome> {
        let runtime = self.runtime.clone();
        async move {
            let timeout = target.timeout;
            match target.action {
                ProbeAction::Exec { command } => {
                    exec::probe(runtime.as_ref(), &target.container_id, command, timeout).await
                }
                ProbeAction::HttpGet {
                    scheme,
                    host,
                    port,
                    path,
                    headers,
                } => {
                    if scheme != "http" && scheme != "https" {
                        return ProbeOutcome::Unknown(ProbeError::Invalid(format!(
                            "unsupported scheme: {scheme:?}"
                        )));
                    }
                    let spec = http::HttpProbe {
                        scheme: &scheme,
                        host: &host,
                        port,
                        path: &path,
                        headers: &headers,
                    };
                    http::probe(&spec, timeout).await
                }
                ProbeAction::TcpSocket { host, port } => tcp::probe(&host, port, timeout).await,
                ProbeAction::Grpc {
                    host,
                    port,
                    service,
                } => grpc::probe(&host, port, service.as_deref(), timeout).await,
            }
        }
        .boxed()
    }
}
