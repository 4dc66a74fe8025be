//! The pods bound to this node, as StatusManagerActor reaches them: live reads and status
//! patches through the heartbeat client (never queued behind the rate limit), the final delete
//! and the watch through the main client.

use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::Pod;

use super::ApiResult;

/// What a watch on the node's pods says.
#[derive(Debug, Clone, PartialEq)]
pub enum PodWatchEvent {
    /// The pod as it is now on the server (listed, added or modified).
    Applied(Box<Pod>),
    /// The pod is gone, as last seen.
    Deleted(Box<Pod>),
}

pub trait PodApi: Send + Sync + 'static {
    /// `GET pods/{name}` (live, not from a cache).
    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Pod>>;
    /// `PATCH pods/{name}/status` with a strategic merge patch; a patch carrying
    /// `metadata.uid` is refused (422) when the pod of that name has another UID.
    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Pod>>;
    /// `DELETE pods/{name}` with `gracePeriodSeconds: 0` and `preconditions.uid`: only the
    /// pod with that UID is deleted (another one is a 409 Conflict).
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> BoxFuture<'static, ApiResult<()>>;
    /// A never-ending watch of the pods with `spec.nodeName=<node>`: reconnects and relists
    /// by itself.
    fn watch_pods(&self, node: &str) -> BoxStream<'static, PodWatchEvent>;
}
