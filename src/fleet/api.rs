//! The API ports as a fleet's nodes see them: every call goes through the one shared
//! [`KubeApi`] (its clients, connection pools and rate limiters), except the two watches, which
//! come from the fleet's [`SharedWatches`] instead of one long request per node and kind.
//! Heartbeat connection resets are shared too, so they are bounded for the whole fleet.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod},
    storage::v1::CSIDriver,
};
use nodepulse_actors::{
    ports::{
        ApiRecovery, ApiResult, CsiDriverRegistration, CsiNodeApi, LeaseApi, LeaseRenewal,
        MirrorPodApi, NodeApi, NodeEvent, NodeWatchEvent, PodApi, PodEvent, PodWatchEvent,
    },
    volume_manager::content::{TokenSpec, token::IssuedToken},
    volume_manager::{StorageApi, VolumeSourceApi},
};

use crate::apiserver_client::{KubeApi, SharedWatches};

/// The fewest seconds between two resets of the heartbeat client the fleet shares.
const RESET_AT_MOST_EVERY: Duration = Duration::from_secs(10);

/// Admits one reset per period. A node whose heartbeat fails twice resets the client every
/// node shares; without a bound, a slow API server failing many nodes at once would have
/// them reset it (dropping everyone's connections, and re-reading the CA bundle) in a storm.
#[derive(Debug, Default)]
struct ResetGate {
    last: Mutex<Option<Instant>>,
}

impl ResetGate {
    fn admit(&self, now: Instant, period: Duration) -> bool {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| now.saturating_duration_since(at) < period) {
            return false;
        }
        *last = Some(now);
        true
    }
}

pub struct FleetApi {
    api: Arc<KubeApi>,
    watches: SharedWatches,
    resets: ResetGate,
}

impl FleetApi {
    pub fn new(api: Arc<KubeApi>, watches: SharedWatches) -> Self {
        Self {
            api,
            watches,
            resets: ResetGate::default(),
        }
    }

    fn reset_heartbeat_connections(&self) {
        if self.resets.admit(Instant::now(), RESET_AT_MOST_EVERY) {
            self.api.reset_heartbeat_connections();
        } else {
            tracing::debug!("the shared heartbeat client was reset moments ago; not again");
        }
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

    /// Resets the heartbeat client every node shares, as one kubelet resets its own, at most
    /// once per [`RESET_AT_MOST_EVERY`].
    fn reset_heartbeat_connections(&self) {
        FleetApi::reset_heartbeat_connections(self);
    }

    fn recovery(&self) -> ApiRecovery {
        self.api.reachability().recovery()
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
        FleetApi::reset_heartbeat_connections(self);
    }

    fn recovery(&self) -> ApiRecovery {
        self.api.reachability().recovery()
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

    fn recovery(&self) -> ApiRecovery {
        self.api.reachability().recovery()
    }
}

impl MirrorPodApi for FleetApi {
    fn create_pod(&self, pod: Pod) -> BoxFuture<'static, ApiResult<Pod>> {
        MirrorPodApi::create_pod(&*self.api, pod)
    }
}

impl VolumeSourceApi for FleetApi {
    fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<k8s_openapi::api::core::v1::ConfigMap>> {
        self.api.get_config_map(namespace, name)
    }

    fn get_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<k8s_openapi::api::core::v1::Secret>> {
        self.api.get_secret(namespace, name)
    }

    fn request_token(&self, spec: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        self.api.request_token(spec)
    }
}

impl StorageApi for FleetApi {
    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<PersistentVolumeClaim>> {
        self.api.get_claim(namespace, name)
    }

    fn get_volume(&self, name: &str) -> BoxFuture<'static, ApiResult<PersistentVolume>> {
        self.api.get_volume(name)
    }

    fn get_csi_driver(&self, name: &str) -> BoxFuture<'static, ApiResult<Option<CSIDriver>>> {
        self.api.get_csi_driver(name)
    }

    fn attachment_metadata(
        &self,
        driver: &str,
        volume_handle: &str,
        node: &str,
    ) -> BoxFuture<'static, ApiResult<BTreeMap<String, String>>> {
        self.api.attachment_metadata(driver, volume_handle, node)
    }
}

/// Fleet nodes run no plugin watcher, but the port is the node's: delegated all the same.
impl CsiNodeApi for FleetApi {
    fn add_driver_to_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        self.api.add_driver_to_node(node, registration)
    }

    fn add_driver_to_csi_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        self.api.add_driver_to_csi_node(node, registration)
    }

    fn remove_driver_from_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        self.api.remove_driver_from_node(node, driver)
    }

    fn remove_driver_from_csi_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        self.api.remove_driver_from_csi_node(node, driver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_client_is_reset_at_most_once_a_period() {
        let gate = ResetGate::default();
        let start = Instant::now();
        let period = Duration::from_secs(10);
        assert!(gate.admit(start, period), "the first reset goes through");
        assert!(!gate.admit(start + Duration::from_secs(1), period));
        assert!(!gate.admit(start + Duration::from_millis(9_999), period));
        assert!(gate.admit(start + period, period), "a period later, again");
    }
}
