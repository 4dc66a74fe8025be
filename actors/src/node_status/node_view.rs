//! The Node as NodeStatusActor last had it from the API server (registration, its watch, a
//! status patch's answer), shared read-only with the pods' provider, which admits pods
//! against its allocatable, labels and taints; and, before that, the Node as nodepulse would
//! register it (the kubelet's `initialNode`), which static pods are admitted against while
//! the API server has no Node (`getNodeAnyWay`: a kubeadm control plane starts its
//! kube-apiserver that way). Only NodeStatusActor writes it; it outlives the actor's instances.

use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Node;

#[derive(Debug, Default)]
pub struct NodeView {
    node: RwLock<Option<Arc<Node>>>,
    /// The locally built Node: labels, taints and status as registration would send them.
    initial: RwLock<Option<Arc<Node>>>,
}

impl NodeView {
    /// The Node last seen; `None` until registered (or after it was deleted).
    pub fn get(&self) -> Option<Arc<Node>> {
        self.node
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The kubelet's `getNodeAnyWay`: the Node last seen, else the locally built one; `None`
    /// only before NodeStatusActor first started.
    pub fn get_any_way(&self) -> Option<Arc<Node>> {
        self.get().or_else(|| {
            self.initial
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    pub fn set(&self, node: Option<&Node>) {
        self.share(node.cloned().map(Arc::new));
    }

    /// Shares `node` itself (the writer's own copy), without cloning the Node.
    pub fn share(&self, node: Option<Arc<Node>>) {
        *self.node.write().unwrap_or_else(PoisonError::into_inner) = node;
    }

    /// The Node as it would be registered, for [`Self::get_any_way`].
    pub fn set_initial(&self, node: Node) {
        *self.initial.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Node {
        Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Node::default()
        }
    }

    fn name(node: Option<Arc<Node>>) -> Option<String> {
        node.and_then(|node| node.metadata.name.clone())
    }

    #[test]
    fn any_way_is_the_api_node_when_known_and_the_initial_one_before() {
        let view = NodeView::default();
        assert_eq!(name(view.get_any_way()), None);
        view.set_initial(named("local"));
        assert_eq!(name(view.get()), None, "not registered");
        assert_eq!(name(view.get_any_way()), Some("local".to_owned()));
        view.set(Some(&named("api")));
        assert_eq!(name(view.get_any_way()), Some("api".to_owned()));
        view.set(None);
        assert_eq!(
            name(view.get_any_way()),
            Some("local".to_owned()),
            "deleted"
        );
    }
}
