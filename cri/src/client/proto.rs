//! The few CRI v1 (`runtime.v1`) messages nodepulse exchanges, written by hand with prost's
//! derives so the build needs no protoc. Field numbers are those of kubernetes/cri-api
//! `pkg/apis/runtime/v1/api.proto`; fields nodepulse never reads are left out (prost skips
//! unknown fields on decode, and proto3 omits them on encode). The pod calls' messages live in
//! the submodules, one per CRI area.

mod container;
mod events;
mod image;
mod sandbox;
mod stats;
pub mod streaming;

pub use container::*;
pub use events::*;
pub use image::*;
pub use sandbox::*;
pub use stats::*;

#[cfg(test)]
mod capability_wire_tests;
#[cfg(test)]
mod security_wire_tests;
#[cfg(test)]
mod stats_wire_tests;
#[cfg(test)]
mod wire_tests;

/// `Int64Value { int64 value = 1; }`: an int64 that can be unset (a user id of 0 is root).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64Value {
    #[prost(int64, tag = "1")]
    pub value: i64,
}

/// `VersionRequest { string version = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionRequest {
    #[prost(string, tag = "1")]
    pub version: String,
}

/// `VersionResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionResponse {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    #[prost(string, tag = "4")]
    pub runtime_api_version: String,
}

/// `StatusRequest { bool verbose = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {
    #[prost(bool, tag = "1")]
    pub verbose: bool,
}

/// `RuntimeCondition`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeCondition {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(bool, tag = "2")]
    pub status: bool,
    #[prost(string, tag = "3")]
    pub reason: String,
    #[prost(string, tag = "4")]
    pub message: String,
}

/// `RuntimeStatus { repeated RuntimeCondition conditions = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeStatus {
    #[prost(message, repeated, tag = "1")]
    pub conditions: Vec<RuntimeCondition>,
}

/// `StatusResponse`: `status = 1`, `info = 2` (verbose only), the runtime handlers (3) and
/// the runtime's features (4). A runtime older than these fields (containerd 1.6) sends
/// neither: no handlers, no features.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<RuntimeStatus>,
    #[prost(map = "string, string", tag = "2")]
    pub info: std::collections::HashMap<String, String>,
    #[prost(message, repeated, tag = "3")]
    pub runtime_handlers: Vec<RuntimeHandler>,
    #[prost(message, optional, tag = "4")]
    pub features: Option<RuntimeFeatures>,
}

/// `RuntimeHandlerFeatures { bool recursive_read_only_mounts = 1; bool user_namespaces = 2; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeHandlerFeatures {
    #[prost(bool, tag = "1")]
    pub recursive_read_only_mounts: bool,
    #[prost(bool, tag = "2")]
    pub user_namespaces: bool,
}

/// `RuntimeHandler { string name = 1; RuntimeHandlerFeatures features = 2; }`: the default
/// handler has the empty name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeHandler {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub features: Option<RuntimeHandlerFeatures>,
}

/// `RuntimeFeatures { bool supplemental_groups_policy = 1; bool user_namespaces_host_network = 2; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeFeatures {
    #[prost(bool, tag = "1")]
    pub supplemental_groups_policy: bool,
    #[prost(bool, tag = "2")]
    pub user_namespaces_host_network: bool,
}

/// `NetworkConfig { string pod_cidr = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkConfig {
    #[prost(string, tag = "1")]
    pub pod_cidr: String,
}

/// `RuntimeConfig { NetworkConfig network_config = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RuntimeConfig {
    #[prost(message, optional, tag = "1")]
    pub network_config: Option<NetworkConfig>,
}

/// `UpdateRuntimeConfigRequest { RuntimeConfig runtime_config = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateRuntimeConfigRequest {
    #[prost(message, optional, tag = "1")]
    pub runtime_config: Option<RuntimeConfig>,
}

/// `UpdateRuntimeConfigResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateRuntimeConfigResponse {}

/// `ImageFsInfoRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageFsInfoRequest {}

/// `UInt64Value { uint64 value = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

/// `FilesystemIdentifier { string mountpoint = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct FilesystemIdentifier {
    #[prost(string, tag = "1")]
    pub mountpoint: String,
}

/// `FilesystemUsage`
#[derive(Clone, PartialEq, prost::Message)]
pub struct FilesystemUsage {
    #[prost(int64, tag = "1")]
    pub timestamp: i64,
    #[prost(message, optional, tag = "2")]
    pub fs_id: Option<FilesystemIdentifier>,
    #[prost(message, optional, tag = "3")]
    pub used_bytes: Option<UInt64Value>,
    #[prost(message, optional, tag = "4")]
    pub inodes_used: Option<UInt64Value>,
}

/// `ImageFsInfoResponse`: image filesystems (1) and, when split, container filesystems (2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageFsInfoResponse {
    #[prost(message, repeated, tag = "1")]
    pub image_filesystems: Vec<FilesystemUsage>,
    #[prost(message, repeated, tag = "2")]
    pub container_filesystems: Vec<FilesystemUsage>,
}

/// The gRPC paths of the calls above.
pub mod paths {
    pub const STATUS: &str = "/runtime.v1.RuntimeService/Status";
    pub const VERSION: &str = "/runtime.v1.RuntimeService/Version";
    pub const UPDATE_RUNTIME_CONFIG: &str = "/runtime.v1.RuntimeService/UpdateRuntimeConfig";
    pub const IMAGE_FS_INFO: &str = "/runtime.v1.ImageService/ImageFsInfo";
    pub const RUN_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/RunPodSandbox";
    pub const STOP_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/StopPodSandbox";
    pub const REMOVE_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/RemovePodSandbox";
    pub const POD_SANDBOX_STATUS: &str = "/runtime.v1.RuntimeService/PodSandboxStatus";
    pub const LIST_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/ListPodSandbox";
    pub const CREATE_CONTAINER: &str = "/runtime.v1.RuntimeService/CreateContainer";
    pub const START_CONTAINER: &str = "/runtime.v1.RuntimeService/StartContainer";
    pub const STOP_CONTAINER: &str = "/runtime.v1.RuntimeService/StopContainer";
    pub const REMOVE_CONTAINER: &str = "/runtime.v1.RuntimeService/RemoveContainer";
    pub const CONTAINER_STATUS: &str = "/runtime.v1.RuntimeService/ContainerStatus";
    pub const UPDATE_CONTAINER_RESOURCES: &str =
        "/runtime.v1.RuntimeService/UpdateContainerResources";
    pub const LIST_CONTAINERS: &str = "/runtime.v1.RuntimeService/ListContainers";
    pub const GET_CONTAINER_EVENTS: &str = "/runtime.v1.RuntimeService/GetContainerEvents";
    pub const EXEC_SYNC: &str = "/runtime.v1.RuntimeService/ExecSync";
    pub const IMAGE_STATUS: &str = "/runtime.v1.ImageService/ImageStatus";
    pub const PULL_IMAGE: &str = "/runtime.v1.ImageService/PullImage";
    pub const LIST_IMAGES: &str = "/runtime.v1.ImageService/ListImages";
    pub const REMOVE_IMAGE: &str = "/runtime.v1.ImageService/RemoveImage";
    pub const REOPEN_CONTAINER_LOG: &str = "/runtime.v1.RuntimeService/ReopenContainerLog";
    pub const CONTAINER_STATS: &str = "/runtime.v1.RuntimeService/ContainerStats";
    pub const LIST_CONTAINER_STATS: &str = "/runtime.v1.RuntimeService/ListContainerStats";
    pub const POD_SANDBOX_STATS: &str = "/runtime.v1.RuntimeService/PodSandboxStats";
    pub const LIST_POD_SANDBOX_STATS: &str = "/runtime.v1.RuntimeService/ListPodSandboxStats";
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// Bytes as the Go CRI client encodes them, worked out by hand from the wire format:
    /// field 1 (conditions, length-delimited) holding type "RuntimeReady", status true.
    #[test]
    fn decodes_a_status_response_by_the_cri_field_numbers() {
        let condition = [
            &[0x0a, 12][..],
            b"RuntimeReady",
            &[0x10, 0x01],
            &[0x1a, 3],
            b"why",
            &[0x22, 2],
            b"ok",
        ]
        .concat();
        let status = [
            &[0x0a, u8::try_from(condition.len()).expect("short")][..],
            &condition,
        ]
        .concat();
        let response = [
            &[0x0a, u8::try_from(status.len()).expect("short")][..],
            &status,
        ]
        .concat();
        let decoded = StatusResponse::decode(response.as_slice()).expect("decodes");
        let conditions = decoded.status.expect("status").conditions;
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].r#type, "RuntimeReady");
        assert!(conditions[0].status);
        assert_eq!(conditions[0].reason, "why");
        assert_eq!(conditions[0].message, "ok");
    }

    #[test]
    fn encodes_the_pod_cidr_at_runtime_config_network_config_pod_cidr() {
        let request = UpdateRuntimeConfigRequest {
            runtime_config: Some(RuntimeConfig {
                network_config: Some(NetworkConfig {
                    pod_cidr: "10.0.0.0/24".to_owned(),
                }),
            }),
        };
        let cidr = b"10.0.0.0/24";
        let network = [&[0x0a, 11][..], cidr].concat();
        let runtime = [&[0x0a, 13][..], &network].concat();
        let expected = [&[0x0a, 15][..], &runtime].concat();
        assert_eq!(request.encode_to_vec(), expected);
    }
}
