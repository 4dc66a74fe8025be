//! The CSI v1 (`csi.v1`) Node messages nodepulse exchanges with a driver, written by hand with
//! prost's derives so the build needs no protoc (as `cri::proto` does). Field numbers are those
//! of container-storage-interface/spec `csi.proto`; fields nodepulse never sets or reads are
//! left out (prost skips unknown fields on decode).

use std::collections::HashMap;

/// `NodeGetInfoRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoRequest {}

/// `Topology { map<string, string> segments = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Topology {
    #[prost(map = "string, string", tag = "1")]
    pub segments: HashMap<String, String>,
}

/// `NodeGetInfoResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetInfoResponse {
    #[prost(string, tag = "1")]
    pub node_id: String,
    #[prost(int64, tag = "2")]
    pub max_volumes_per_node: i64,
    #[prost(message, optional, tag = "3")]
    pub accessible_topology: Option<Topology>,
}

/// `NodeGetCapabilitiesRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesRequest {}

/// `NodeServiceCapability.RPC { Type type = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeRpcCapability {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
}

/// `NodeServiceCapability { oneof type { RPC rpc = 1; } }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeServiceCapability {
    #[prost(message, optional, tag = "1")]
    pub rpc: Option<NodeRpcCapability>,
}

/// `NodeServiceCapability.RPC.Type` values nodepulse looks for.
pub mod node_capability {
    pub const STAGE_UNSTAGE_VOLUME: i32 = 1;
    pub const GET_VOLUME_STATS: i32 = 2;
}

/// `NodeGetCapabilitiesResponse { repeated NodeServiceCapability capabilities = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetCapabilitiesResponse {
    #[prost(message, repeated, tag = "1")]
    pub capabilities: Vec<NodeServiceCapability>,
}

/// `VolumeCapability.MountVolume`
#[derive(Clone, PartialEq, prost::Message)]
pub struct MountVolume {
    #[prost(string, tag = "1")]
    pub fs_type: String,
    #[prost(string, repeated, tag = "2")]
    pub mount_flags: Vec<String>,
}

/// `VolumeCapability.AccessMode { Mode mode = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct AccessMode {
    #[prost(int32, tag = "1")]
    pub mode: i32,
}

/// `VolumeCapability.AccessMode.Mode` values the kubelet maps Kubernetes access modes to.
pub mod access_mode {
    pub const SINGLE_NODE_WRITER: i32 = 1;
    pub const MULTI_NODE_READER_ONLY: i32 = 3;
    pub const MULTI_NODE_MULTI_WRITER: i32 = 5;
}

/// `VolumeCapability`: the mount access type (`mount = 2`; block, `1`, is never sent) and the
/// access mode (`3`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct VolumeCapability {
    #[prost(message, optional, tag = "2")]
    pub mount: Option<MountVolume>,
    #[prost(message, optional, tag = "3")]
    pub access_mode: Option<AccessMode>,
}

/// `NodeStageVolumeRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeStageVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(map = "string, string", tag = "2")]
    pub publish_context: HashMap<String, String>,
    #[prost(string, tag = "3")]
    pub staging_target_path: String,
    #[prost(message, optional, tag = "4")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(map = "string, string", tag = "5")]
    pub secrets: HashMap<String, String>,
    #[prost(map = "string, string", tag = "6")]
    pub volume_context: HashMap<String, String>,
}

/// `NodeStageVolumeResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeStageVolumeResponse {}

/// `NodeUnstageVolumeRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnstageVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub staging_target_path: String,
}

/// `NodeUnstageVolumeResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnstageVolumeResponse {}

/// `NodePublishVolumeRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(map = "string, string", tag = "2")]
    pub publish_context: HashMap<String, String>,
    #[prost(string, tag = "3")]
    pub staging_target_path: String,
    #[prost(string, tag = "4")]
    pub target_path: String,
    #[prost(message, optional, tag = "5")]
    pub volume_capability: Option<VolumeCapability>,
    #[prost(bool, tag = "6")]
    pub readonly: bool,
    #[prost(map = "string, string", tag = "7")]
    pub secrets: HashMap<String, String>,
    #[prost(map = "string, string", tag = "8")]
    pub volume_context: HashMap<String, String>,
}

/// `NodePublishVolumeResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodePublishVolumeResponse {}

/// `NodeUnpublishVolumeRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeRequest {
    #[prost(string, tag = "1")]
    pub volume_id: String,
    #[prost(string, tag = "2")]
    pub target_path: String,
}

/// `NodeUnpublishVolumeResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeUnpublishVolumeResponse {}

/// The gRPC paths of the calls above.
pub mod paths {
    pub const NODE_GET_INFO: &str = "/csi.v1.Node/NodeGetInfo";
    pub const NODE_GET_CAPABILITIES: &str = "/csi.v1.Node/NodeGetCapabilities";
    pub const NODE_STAGE_VOLUME: &str = "/csi.v1.Node/NodeStageVolume";
    pub const NODE_UNSTAGE_VOLUME: &str = "/csi.v1.Node/NodeUnstageVolume";
    pub const NODE_PUBLISH_VOLUME: &str = "/csi.v1.Node/NodePublishVolume";
    pub const NODE_UNPUBLISH_VOLUME: &str = "/csi.v1.Node/NodeUnpublishVolume";
}

/// The CSI access mode the kubelet sends for a Kubernetes one (`asCSIAccessModeV1` for a driver
/// without SINGLE_NODE_MULTI_WRITER, the only kind nodepulse asks for); `UNKNOWN` (0) otherwise.
pub fn csi_access_mode(kubernetes: &str) -> i32 {
    match kubernetes {
        "ReadWriteOnce" | "ReadWriteOncePod" => access_mode::SINGLE_NODE_WRITER,
        "ReadOnlyMany" => access_mode::MULTI_NODE_READER_ONLY,
        "ReadWriteMany" => access_mode::MULTI_NODE_MULTI_WRITER,
        _ => 0,
    }
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
