//! The Lease in `kube-node-lease`, as LeaseActor reaches it.

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;

use super::ApiResult;

/// A renewal of the node's Lease: the fields the kubelet re-asserts on every write, plus the
/// resourceVersion it was based on, which keeps the write optimistic (a stale one is a 409).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRenewal {
    pub name: String,
    pub resource_version: String,
    pub lease_duration_seconds: i32,
    pub renew_time: k8s_openapi::jiff::Timestamp,
    /// Set only when the cached Lease has no owner yet and the Node's UID became known.
    pub owner_node_uid: Option<String>,
}

/// The Lease in `kube-node-lease` and the Node UID its owner reference needs. All calls go
/// through the heartbeat client: bounded by its timeout, never rate limited.
pub trait LeaseApi: Send + Sync + 'static {
    fn get_lease(&self, name: &str) -> BoxFuture<'static, ApiResult<Lease>>;
    fn create_lease(&self, lease: Lease) -> BoxFuture<'static, ApiResult<Lease>>;
    fn renew_lease(&self, renewal: LeaseRenewal) -> BoxFuture<'static, ApiResult<Lease>>;
    fn node_uid(&self, node: &str) -> BoxFuture<'static, ApiResult<String>>;
    /// Drops the heartbeat client's connections so the next request dials afresh (the
    /// kubelet's onRepeatedHeartbeatFailure).
    fn reset_heartbeat_connections(&self);
    /// The API server coming back after a run of failures, which retry waits listen to
    /// (none by default: a fake never goes down).
    fn recovery(&self) -> super::ApiRecovery {
        super::ApiRecovery::never()
    }
}

/// The namespace node leases live in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
