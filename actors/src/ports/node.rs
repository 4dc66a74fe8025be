//! The Node, as NodeStatusActor reaches it: registration through the main (rate-limited)
//! client; status reads and patches through the heartbeat client; events through the main
//! client under the event rate limit.

use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::Node;

use super::ApiResult;

/// An event about the Node, as a setter or the actor decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

impl NodeEvent {
    pub fn normal(reason: &str, message: String) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            message,
        }
    }

    pub fn warning(reason: &str, message: String) -> Self {
        Self {
            warning: true,
            reason: reason.to_owned(),
            message,
        }
    }
}

/// What a watch on the Node says.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeWatchEvent {
    /// The Node as it is now on the server.
    Present(Box<Node>),
    /// The Node is gone.
    Deleted,
}

pub trait NodeApi: Send + Sync + 'static {
    /// A never-ending watch of the Node named `name` (the kubelet's informer on its own Node):
    /// reconnects and relists by itself; a relist without the Node reports it deleted.
    fn watch_node(&self, name: &str) -> BoxStream<'static, NodeWatchEvent>;
    fn create_node(&self, node: Node) -> BoxFuture<'static, ApiResult<Node>>;
    fn get_node(&self, name: &str) -> BoxFuture<'static, ApiResult<Node>>;
    /// `PATCH nodes/{name}/status` with a strategic merge patch.
    fn patch_node_status(
        &self,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Node>>;
    fn record_event(&self, node: &str, event: NodeEvent) -> BoxFuture<'static, ApiResult<()>>;
    /// Drops the heartbeat client's connections (the kubelet's onRepeatedHeartbeatFailure).
    fn reset_heartbeat_connections(&self);
    /// The API server coming back after a run of failures, which retry waits listen to
    /// (none by default: a fake never goes down).
    fn recovery(&self) -> super::ApiRecovery {
        super::ApiRecovery::never()
    }
}
