//! The Node as NodeStatusActor last had it from the API server (registration, its watch, a
//! status patch's answer), shared read-only with the pods' provider, which admits pods
//! against its allocatable, labels and taints. Only NodeStatusActor writes it; it outlives
//! the actor's instances.

use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Node;

#[derive(Debug, Default)]
pub struct NodeView {
    node: RwLock<Option<Arc<Node>>>,
}

impl NodeView {
    /// The Node last seen; `None` until registered (or after it was deleted).
    pub fn get(&self) -> Option<Arc<Node>> {
        self.node
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, node: Option<&Node>) {
        self.share(node.cloned().map(Arc::new));
    }

    /// Shares `node` itself (the writer's own copy), without cloning the Node.
    pub fn share(&self, node: Option<Arc<Node>>) {
        *self.node.write().unwrap_or_else(PoisonError::into_inner) = node;
    }
}
