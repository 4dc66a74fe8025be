//! The CSI v1 Node client: the six calls the kubelet makes to a driver's node plugin, each
//! bounded by the kubelet's `csiTimeout` (2 min). Requests are built here the way the kubelet's
//! `csi_client.go` builds them (mount access type with fsType and mount flags, access mode).

use std::{collections::HashMap, path::Path, time::Duration};

use nodepulse_actors::ports::{CsiCallError, CsiNodeInfo, CsiVolume};

use super::{
    grpc::CsiGrpc,
    proto::{self, csi_access_mode, node_capability, paths},
};

/// The kubelet's `csiTimeout` for every node RPC.
pub const CSI_TIMEOUT: Duration = Duration::from_secs(120);

/// A client of one driver's node service. Cheap to clone.
#[derive(Clone)]
pub struct CsiClient {
    grpc: CsiGrpc,
    timeout: Duration,
}

impl CsiClient {
    /// A client for the driver's `endpoint` (a socket path, with or without `unix://`).
    pub fn new(endpoint: &str) -> Self {
        Self::with_timeout(endpoint, CSI_TIMEOUT)
    }

    pub fn with_timeout(endpoint: &str, timeout: Duration) -> Self {
        Self {
            grpc: CsiGrpc::new(endpoint),
            timeout,
        }
    }

    pub fn socket(&self) -> &Path {
        self.grpc.socket()
    }

    pub async fn node_get_info(&self) -> Result<CsiNodeInfo, CsiCallError> {
        let info: proto::NodeGetInfoResponse = self
            .grpc
            .unary(
                paths::NODE_GET_INFO,
                proto::NodeGetInfoRequest {},
                self.timeout,
            )
            .await?;
        Ok(CsiNodeInfo {
            node_id: info.node_id,
            max_volumes_per_node: info.max_volumes_per_node,
            accessible_topology: info
                .accessible_topology
                .map(|topology| topology.segments.into_iter().collect())
                .unwrap_or_default(),
        })
    }

    /// Whether the driver advertises STAGE_UNSTAGE_VOLUME (`NodeSupportsStageUnstage`).
    pub async fn node_supports_stage_unstage(&self) -> Result<bool, CsiCallError> {
        let capabilities: proto::NodeGetCapabilitiesResponse = self
            .grpc
            .unary(
                paths::NODE_GET_CAPABILITIES,
                proto::NodeGetCapabilitiesRequest {},
                self.timeout,
            )
            .await?;
        Ok(capabilities.capabilities.iter().any(|capability| {
            capability
                .rpc
                .as_ref()
                .is_some_and(|rpc| rpc.r#type == node_capability::STAGE_UNSTAGE_VOLUME)
        }))
    }

    pub async fn node_stage_volume(
        &self,
        volume: &CsiVolume,
        staging_target_path: &Path,
    ) -> Result<(), CsiCallError> {
        let request = proto::NodeStageVolumeRequest {
            volume_id: volume.volume_handle.clone(),
            publish_context: hash_map(&volume.publish_context),
            staging_target_path: staging_target_path.display().to_string(),
            volume_capability: Some(capability(volume)),
            secrets: HashMap::new(),
            volume_context: hash_map(&volume.volume_attributes),
        };
        let _: proto::NodeStageVolumeResponse = self
            .grpc
            .unary(paths::NODE_STAGE_VOLUME, request, self.timeout)
            .await?;
        Ok(())
    }

    pub async fn node_unstage_volume(
        &self,
        volume_handle: &str,
        staging_target_path: &Path,
    ) -> Result<(), CsiCallError> {
        let request = proto::NodeUnstageVolumeRequest {
            volume_id: volume_handle.to_owned(),
            staging_target_path: staging_target_path.display().to_string(),
        };
        let _: proto::NodeUnstageVolumeResponse = self
            .grpc
            .unary(paths::NODE_UNSTAGE_VOLUME, request, self.timeout)
            .await?;
        Ok(())
    }

    /// `staging_target_path` is `None` when the driver does not stage.
    pub async fn node_publish_volume(
        &self,
        volume: &CsiVolume,
        staging_target_path: Option<&Path>,
        target_path: &Path,
    ) -> Result<(), CsiCallError> {
        let request = proto::NodePublishVolumeRequest {
            volume_id: volume.volume_handle.clone(),
            publish_context: hash_map(&volume.publish_context),
            staging_target_path: staging_target_path
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            target_path: target_path.display().to_string(),
            volume_capability: Some(capability(volume)),
            readonly: volume.read_only,
            secrets: HashMap::new(),
            volume_context: hash_map(&volume.volume_attributes),
        };
        let _: proto::NodePublishVolumeResponse = self
            .grpc
            .unary(paths::NODE_PUBLISH_VOLUME, request, self.timeout)
            .await?;
        Ok(())
    }

    pub async fn node_unpublish_volume(
        &self,
        volume_handle: &str,
        target_path: &Path,
    ) -> Result<(), CsiCallError> {
        let request = proto::NodeUnpublishVolumeRequest {
            volume_id: volume_handle.to_owned(),
            target_path: target_path.display().to_string(),
        };
        let _: proto::NodeUnpublishVolumeResponse = self
            .grpc
            .unary(paths::NODE_UNPUBLISH_VOLUME, request, self.timeout)
            .await?;
        Ok(())
    }
}

/// A filesystem volume's capability: fsType and the PV's mount options, and the access mode.
fn capability(volume: &CsiVolume) -> proto::VolumeCapability {
    proto::VolumeCapability {
        mount: Some(proto::MountVolume {
            fs_type: volume.fs_type.clone(),
            mount_flags: volume.mount_options.clone(),
        }),
        access_mode: Some(proto::AccessMode {
            mode: csi_access_mode(&volume.access_mode),
        }),
    }
}

fn hash_map(map: &std::collections::BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}
