//! What a node needs of the API server for its static pods' mirror pods beyond [`PodApi`]
//! (reads, and the delete with a UID precondition): creating one. The kubelet's
//! `MirrorClient`; only a node that runs static pods calls it.
//!
//! [`PodApi`]: super::PodApi

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use super::ApiResult;

pub trait MirrorPodApi: Send + Sync + 'static {
    /// `POST pods` in the pod's namespace; an existing pod of that name is `AlreadyExists`.
    fn create_pod(&self, pod: Pod) -> BoxFuture<'static, ApiResult<Pod>>;
}
