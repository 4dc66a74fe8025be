//! The pods bound to this node, as StatusManagerActor reaches them: live reads and status
//! patches through the heartbeat client (never queued behind the rate limit), the final delete
//! and the watch through the main client.

use std::{collections::BTreeMap, sync::Arc};

use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::Pod;

use super::ApiResult;
use crate::kept_pod::KeptPod;

/// What a watch on the node's pods says. A pod is shared, not copied: the watch's routing,
/// the pod source, the provider, StatusManager and the volume manager all hold this one
/// [`KeptPod`] of each pod version (a fleet holds thousands of pods, five copies each before),
/// decoded only while one of them reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum PodWatchEvent {
    /// The pod as it is now on the server (listed, added or modified).
    Applied(KeptPod),
    /// The pod is gone, as last seen.
    Deleted(KeptPod),
    /// Every pod bound to the node has now been reported (after the first list, and after each
    /// relist): what was not reported is not there. The volume manager unmounts nothing before
    /// it, as the kubelet waits for its pod sources to be ready.
    Listed,
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
    /// Records an Event about `pod` (under the event rate limit; one over it is dropped).
    fn record_pod_event(&self, pod: &Pod, event: PodEvent) -> BoxFuture<'static, ApiResult<()>>;
    /// The API server coming back after a run of failures, which retry waits listen to
    /// (none by default: a fake never goes down).
    fn recovery(&self) -> super::ApiRecovery {
        super::ApiRecovery::never()
    }
}

/// An Event about a pod, as StatusManagerActor decided it (an eviction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub warning: bool,
    pub reason: String,
    pub message: String,
    pub annotations: BTreeMap<String, String>,
}

impl PodEvent {
    pub fn normal(reason: &str, message: String) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            message,
            annotations: BTreeMap::new(),
        }
    }

    pub fn warning(reason: &str, message: String) -> Self {
        Self {
            warning: true,
            ..Self::normal(reason, message)
        }
    }
}

/// What one container of a running pod uses now, as far as its provider knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerStats {
    pub name: String,
    /// Working set in bytes.
    pub memory_bytes: u64,
    /// Writable layer, logs and local volumes, in bytes.
    pub ephemeral_storage_bytes: u64,
}

/// A pod that runs on this node, with what it uses (`None`: its provider has no stats, and
/// the kubelet ranks such pods first for eviction).
#[derive(Debug, Clone, PartialEq)]
pub struct PodStats {
    /// Shared with the provider (not copied: ranking reads it).
    pub pod: Arc<Pod>,
    pub containers: Option<Vec<ContainerStats>>,
    pub processes: Option<u64>,
    /// Its local storage as last measured; `None`: not measured, no local-storage eviction.
    pub storage: Option<PodStorage>,
}

/// A pod's local storage as the kubelet's summary measures it, for the local-storage
/// evictions (emptyDir `sizeLimit`, pod and container `ephemeral-storage` limits).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodStorage {
    pub containers: Vec<ContainerStorage>,
    /// Used bytes of each measured volume, by volume name.
    pub volumes: BTreeMap<String, u64>,
    /// Writable layers, logs and local ephemeral volumes together.
    pub ephemeral_bytes: Option<u64>,
}

/// One container's local storage; `None` where it was not measured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerStorage {
    pub name: String,
    /// Its writable layer.
    pub rootfs_bytes: Option<u64>,
    pub logs_bytes: Option<u64>,
}

/// The pods running on this node, for eviction ranking (the kubelet's active pods with their
/// summary stats).
pub trait PodStatsSource: Send + Sync + 'static {
    fn active_pods(&self) -> Vec<PodStats>;
}
