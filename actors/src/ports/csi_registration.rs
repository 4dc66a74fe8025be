//! What CSI driver registration writes to the API server (the kubelet's `InstallCSIDriver` and
//! `UninstallCSIDriver`): the Node's `csi.volume.kubernetes.io/nodeid` annotation and topology
//! labels, and the driver's entry in the node's CSINode object. The daemon implements it with
//! kube-rs; the plugin watcher's tests use a fake.

use std::collections::BTreeMap;

use futures::future::BoxFuture;

use super::ApiResult;

/// The Node annotation holding every registered driver's node ID, as a JSON map.
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";

/// One driver as NodeGetInfo described it on this node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsiDriverRegistration {
    pub driver: String,
    pub node_id: String,
    /// Topology segments: labels on the Node, sorted keys in the CSINode entry.
    pub topology: BTreeMap<String, String>,
    /// `allocatable.count`: the driver's volume limit when it reported one (> 0), capped at
    /// 2^31 − 1.
    pub max_volumes: Option<i32>,
}

/// The two objects registration writes, in the kubelet's order: the Node first, then CSINode.
pub trait CsiNodeApi: Send + Sync + 'static {
    /// Adds (or replaces) the driver's node ID in the Node's annotation and its topology
    /// segments as Node labels.
    fn add_driver_to_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>>;
    /// Adds (or replaces) the driver's entry in CSINode `node`, creating the object with an
    /// owner reference to the Node when it is missing.
    fn add_driver_to_csi_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>>;
    /// Removes the driver from the annotation (the annotation goes when it empties).
    fn remove_driver_from_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>>;
    /// Removes the driver's entry from CSINode `node`.
    fn remove_driver_from_csi_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>>;
}
