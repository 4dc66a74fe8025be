//! The daemon's run for a fleet: every node's supervisor behind one debug endpoint (each
//! node's actors at `?node=<name>`), until `shutdown`. A node whose supervisor escalates
//! stays stopped and says so at the endpoint; the other nodes keep running, as they would
//! on separate machines.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use super::{Fleet, FleetOptions};
use crate::{cli::Settings, daemon::Outcome, debug, kube_api::KubeApi};

/// How long the nodes get to stop at shutdown.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// Runs the fleet `settings.config.nodes` describes on `api` until `shutdown` resolves. Must
/// run inside an actix `System`.
pub async fn run(
    settings: &Settings,
    api: Arc<KubeApi>,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let config = &settings.config;
    let Ok(debug_address) = config.debug.address.parse::<SocketAddr>() else {
        return Outcome::Failed(format!(
            "debug.address {:?} is not an address",
            config.debug.address
        ));
    };
    let fleet = Fleet::start(settings, api, &FleetOptions::default());
    let gate = debug::FaultInjectionGate::new(
        config.debug.fault_injection.enabled,
        config.debug.fault_injection.token.clone(),
    );
    let endpoint = match debug::start(debug_address, fleet.handles().to_vec(), gate) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            fleet.shutdown(SHUTDOWN_DEADLINE).await;
            return Outcome::Failed(format!(
                "cannot serve the debug endpoint on {debug_address}: {error}"
            ));
        }
    };
    let debug_server = endpoint.server.handle();
    actix_rt::spawn(endpoint.server);
    tracing::info!(nodes = fleet.handles().len(), debug = %endpoint.address, "nodepulse fleet is running");
    for handle in fleet.handles() {
        let handle = handle.clone();
        actix_rt::spawn(async move {
            let escalation = handle.escalated().await;
            tracing::error!(node = %handle.node(), "{escalation}; this node stays stopped, the fleet runs on");
        });
    }
    shutdown.await;
    tracing::info!("shutting down the fleet");
    if !fleet.shutdown(SHUTDOWN_DEADLINE).await {
        tracing::warn!(deadline = ?SHUTDOWN_DEADLINE, "some actors did not stop before the deadline");
    }
    debug_server.stop(true).await;
    Outcome::Stopped
}
