//! The prober's part of a `runtime: cri` node: ProberActor running the kubelet's four probe
//! mechanisms (`crate::probe_handlers::ProbeHandlers`, exec over the node's CRI client), telling
//! StatusManager of readiness and the pod lifecycle actor of everything it publishes. Its
//! results and pods outlive its instances in the `ProberKept` the pods' provider also reads.

use std::sync::Arc;

use nodepulse_actors::{
    ports::ProbeRunner,
    prober::{self, ProberActor, ProberKept, ProberPeers},
};
use nodepulse_supervisor::{ChildSpec, Inbox, SupervisorBuilder};

use super::wiring::Wiring;
use crate::probe_handlers::ProbeHandlers;

impl Wiring<'_> {
    /// ProberActor, after the pod lifecycle actor whose provider feeds it. Without a CRI
    /// client (a bad endpoint, already reported) the node runs no prober.
    pub fn prober(
        &self,
        builder: SupervisorBuilder,
        kept: ProberKept,
        inbox: Inbox<ProberActor>,
    ) -> SupervisorBuilder {
        let Some(Ok(client)) = self.cri.cloned() else {
            tracing::error!("no usable CRI client; this node runs no probes");
            return builder;
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
