//! The prober's part of a `runtime: cri` node: ProberActor running the kubelet's four probe
//! mechanisms (`crate::prober::ProbeHandlers`, exec over a CRI client of its own), telling
//! StatusManager of readiness and the pod lifecycle actor of everything it publishes. Its
//! results and pods outlive its instances in the `ProberKept` the pods' provider also reads.

use std::sync::Arc;

use nodepulse_actors::{
    ports::ProbeRunner,
    prober::{self, ProberActor, ProberKept, ProberPeers},
};
use nodepulse_supervisor::{ChildSpec, Inbox, SupervisorBuilder};

use super::wiring::Wiring;
use crate::{cri::CriClient, prober::ProbeHandlers};

impl Wiring<'_> {
    /// ProberActor, after the pod lifecycle actor whose provider feeds it. Without a CRI
    /// client (a bad endpoint, already reported by the provider) the node runs no prober.
    pub fn prober(
        &self,
        builder: SupervisorBuilder,
        kept: ProberKept,
        inbox: Inbox<ProberActor>,
    ) -> SupervisorBuilder {
        let config = &self.settings.config;
        let client = match CriClient::new(
            &config.container_runtime_endpoint,
            config.runtime_request_timeout.0,
        ) {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(%error, "cannot make the prober's CRI client; this node runs no probes");
                return builder;
            }
        };
        let runner: Arc<dyn ProbeRunner> = Arc::new(ProbeHandlers::new(Arc::new(client)));
        let peers = ProberPeers {
            status_manager: self.addresses.status_manager.recipient(),
            provider: self.addresses.pod_lifecycle.recipient(),
        };
        let spec = ChildSpec::new(prober::NAME, inbox, move || {
            ProberActor::new(Arc::clone(&runner), kept.clone(), peers.clone())
        });
        builder.child(spec)
    }
}
