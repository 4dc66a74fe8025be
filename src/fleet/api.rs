//! The API ports as a fleet's nodes see them: every call goes through the one shared
//! [`KubeApi`] (its clients, connection pools and rate limiters), except the two watches, which
//! come from the fleet's [`SharedWatches`] instead of one long request per node and kind.

use std::sync::Arc;

use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Pod},
};
use nodepulse_actors::ports::{
    ApiResult, LeaseApi, LeaseRenewal, NodeApi, NodeEvent, NodeWatchEvent, PodApi, PodEvent,
    PodWatchEvent,
};

use crate::kube_api::{KubeApi, SharedWatches};

pub struct FleetApi {
    api: Arc<KubeApi>,
    watches: SharedWatches,
}

impl FleetApi {
    pub fn new(api: Arc<KubeApi>, watches: SharedWatches) -> Self {
        Self { api, watches }
    }

    pub fn watches(&self) -> &SharedWatches {
        &self.watches
    }
}

impl NodeApi for FleetApi {
    fn watch_node(&self, name: &str) -> BoxStream<'static, NodeWatchEvent> {
        self.watches.node(name)
    }

    fn create_node(&self, node: Node) -> BoxFuture<'static, ApiResult<Node>> {
        NodeApi::create_node(&*self.api, node)
    }

    fn get_node(&self, name: &str) -> BoxFuture<'static, ApiResult<Node>> {
        NodeApi::get_node(&*self.api, name)
    }

    fn patch_node_status(
        &self,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Node>> {
        NodeApi::patch_node_status(&*self.api, name, patch)
    }

    fn record_event(&self, node: &str, event: NodeEvent) -> BoxFuture<'static, ApiResult<()>> {
        NodeApi::record_event(&*self.api, node, event)
    }

    /// Resets the heartbeat client every node shares, as one kubelet resets its own.
    fn reset_heartbeat_connections(&self) {
        self.api.reset_heartbeat_connections();
    }
}

impl LeaseApi for FleetApi {
    fn get_lease(&self, name: &str) -> BoxFuture<'static, ApiResult<Lease>> {
        LeaseApi::get_lease(&*self.api, name)
    }

    fn create_lease(&self, lease: Lease) -> BoxFuture<'static, ApiResult<Lease>> {
        LeaseApi::create_lease(&*self.api, lease)
    }

    fn renew_lease(&self, renewal: LeaseRenewal) -> BoxFuture<'static, ApiResult<Lease>> {
        LeaseApi::renew_lease(&*self.api, renewal)
    }

    fn node_uid(&self, node: &str) -> BoxFuture<'static, ApiResult<String>> {
        LeaseApi::node_uid(&*self.api, node)
    }

    fn reset_heartbeat_connections(&self) {
        self.api.reset_heartbeat_connections();
    }
}

impl PodApi for FleetApi {
    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Pod>> {
        PodApi::get_pod(&*self.api, namespace, name)
    }

    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Pod>> {
        PodApi::patch_pod_status(&*self.api, namespace, name, patch)
    }

    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        PodApi::delete_pod(&*self.api, namespace, name, uid)
    }

    fn watch_pods(&self, node: &str) -> BoxStream<'static, PodWatchEvent> {
        self.watches.pods(node)
    }

    fn record_pod_event(&self, pod: &Pod, event: PodEvent) -> BoxFuture<'static, ApiResult<()>> {
        PodApi::record_pod_event(&*self.api, pod, event)
    }
}
