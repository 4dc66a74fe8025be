//! What a node's start hands back: its supervisor, its actors' addresses, its one CRI client
//! and the read-only views its parts publish. A service outside the actors (the debug endpoint,
//! the kubelet API, image GC) takes what it needs from here: it reads views and calls the
//! runtime, and never reaches into an actor's state.

use std::sync::Arc;

use nodepulse_actors::{
    eviction::PodStorageCache, node_status::NodeView, pods::PodsView, prober::ProbeResults,
    volume_manager::VolumeView,
};
use nodepulse_supervisor::SupervisorHandle;

use super::NodeAddresses;
use nodepulse_cri::client::CriClient;

/// A started node.
#[derive(Clone)]
pub struct NodeHandle {
    pub supervisor: SupervisorHandle,
    pub addresses: NodeAddresses,
    /// The node's CRI client (`runtime: cri` with a usable endpoint): the same connection its
    /// pods run through. Cheap to clone.
    pub runtime: Option<CriClient>,
    pub views: NodeViews,
}

/// What a node's parts publish for readers outside them. A part that does not run publishes
/// nothing: its view stays empty (or `None`).
#[derive(Clone)]
pub struct NodeViews {
    /// The Node as NodeStatus last had it from the API server.
    pub node: Arc<NodeView>,
    /// The pods the CRI engine runs: names, sandbox and container IDs, states, log paths.
    pub pods: PodsView,
    /// The volume manager's verdict per pod (when the pods run).
    pub volumes: Option<VolumeView>,
    /// The prober's results (on a `runtime: cri` node with its pods).
    pub probes: Option<ProbeResults>,
    /// Where the kubelet API's summary publishes the pods' storage for their eviction.
    pub pod_storage: PodStorageCache,
}

/// A node's parts added to a supervisor that has not started yet (`NodeActors::add_to`).
pub struct WiredNode {
    pub addresses: NodeAddresses,
    pub runtime: Option<CriClient>,
    pub views: NodeViews,
}

impl WiredNode {
    /// The handle, once `supervisor` runs the parts.
    pub fn started(self, supervisor: SupervisorHandle) -> NodeHandle {
        NodeHandle {
            supervisor,
            addresses: self.addresses,
            runtime: self.runtime,
            views: self.views,
        }
    }
}
