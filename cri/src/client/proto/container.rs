//! CRI `runtime.v1` container messages: CreateContainer's config (image, command, env, mounts,
//! Linux resources and security context, log path), the container's status and listing, and
//! ExecSync. Field numbers are those of cri-api's `api.proto`.

use std::collections::HashMap;

use super::{
    ImageSpec, Int64Value, NamespaceOption, PodSandboxConfig, SeLinuxOption, SecurityProfile,
};

/// `ContainerState`: created, running, exited, unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ContainerState {
    ContainerCreated = 0,
    ContainerRunning = 1,
    ContainerExited = 2,
    ContainerUnknown = 3,
}

/// `ContainerMetadata`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerMetadata {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint32, tag = "2")]
    pub attempt: u32,
}

/// `KeyValue` (an environment variable; the value is `bytes` on the wire).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `MountPropagation`: rprivate, rslave, rshared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MountPropagation {
    PropagationPrivate = 0,
    PropagationHostToContainer = 1,
    PropagationBidirectional = 2,
}

/// `Mount`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mount {
    #[prost(string, tag = "1")]
    pub container_path: String,
    #[prost(string, tag = "2")]
    pub host_path: String,
    #[prost(bool, tag = "3")]
    pub readonly: bool,
    #[prost(bool, tag = "4")]
    pub selinux_relabel: bool,
    #[prost(enumeration = "MountPropagation", tag = "5")]
    pub propagation: i32,
    /// Read-only all the way down (submounts too); only with `readonly` and private
    /// propagation, and only where the runtime's handler says it can.
    #[prost(bool, tag = "8")]
    pub recursive_read_only: bool,
    /// An image volume: the image to mount (its reference as PullImage or ImageStatus gave
    /// it), with `host_path` empty. A runtime that predates image volumes (containerd 1.6)
    /// skips the field, and so sees a mount of the empty host path.
    #[prost(message, optional, tag = "9")]
    pub image: Option<ImageSpec>,
    /// The path inside the image to mount instead of its root (`volumeMounts[].subPath`).
    #[prost(string, tag = "10")]
    pub image_sub_path: String,
}

/// `LinuxContainerResources`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerResources {
    #[prost(int64, tag = "1")]
    pub cpu_period: i64,
    #[prost(int64, tag = "2")]
    pub cpu_quota: i64,
    #[prost(int64, tag = "3")]
    pub cpu_shares: i64,
    #[prost(int64, tag = "4")]
    pub memory_limit_in_bytes: i64,
    #[prost(int64, tag = "5")]
    pub oom_score_adj: i64,
    #[prost(int64, tag = "10")]
    pub memory_swap_limit_in_bytes: i64,
}

/// `Capability`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Capability {
    #[prost(string, repeated, tag = "1")]
    pub add_capabilities: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub drop_capabilities: Vec<String>,
}

/// `LinuxContainerSecurityContext`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerSecurityContext {
    #[prost(message, optional, tag = "1")]
    pub capabilities: Option<Capability>,
    #[prost(bool, tag = "2")]
    pub privileged: bool,
    #[prost(message, optional, tag = "3")]
    pub namespace_options: Option<NamespaceOption>,
    #[prost(message, optional, tag = "4")]
    pub selinux_options: Option<SeLinuxOption>,
    #[prost(message, optional, tag = "5")]
    pub run_as_user: Option<Int64Value>,
    #[prost(bool, tag = "7")]
    pub readonly_rootfs: bool,
    #[prost(int64, repeated, tag = "8")]
    pub supplemental_groups: Vec<i64>,
    /// The deprecated AppArmor profile string (`runtime/default`, `unconfined`,
    /// `localhost/<name>`), which the kubelet still sends beside `apparmor` for older runtimes.
    #[prost(string, tag = "9")]
    pub apparmor_profile: String,
    #[prost(bool, tag = "11")]
    pub no_new_privs: bool,
    #[prost(message, optional, tag = "12")]
    pub run_as_group: Option<Int64Value>,
    #[prost(string, repeated, tag = "13")]
    pub masked_paths: Vec<String>,
    #[prost(string, repeated, tag = "14")]
    pub readonly_paths: Vec<String>,
    #[prost(message, optional, tag = "15")]
    pub seccomp: Option<SecurityProfile>,
    #[prost(message, optional, tag = "16")]
    pub apparmor: Option<SecurityProfile>,
}

/// `LinuxContainerConfig`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerConfig {
    #[prost(message, optional, tag = "1")]
    pub resources: Option<LinuxContainerResources>,
    #[prost(message, optional, tag = "2")]
    pub security_context: Option<LinuxContainerSecurityContext>,
}

/// `ContainerConfig`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerConfig {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(message, optional, tag = "2")]
    pub image: Option<ImageSpec>,
    #[prost(string, repeated, tag = "3")]
    pub command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub args: Vec<String>,
    #[prost(string, tag = "5")]
    pub working_dir: String,
    #[prost(message, repeated, tag = "6")]
    pub envs: Vec<KeyValue>,
    #[prost(message, repeated, tag = "7")]
    pub mounts: Vec<Mount>,
    #[prost(map = "string, string", tag = "9")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "10")]
    pub annotations: HashMap<String, String>,
    #[prost(string, tag = "11")]
    pub log_path: String,
    #[prost(bool, tag = "12")]
    pub stdin: bool,
    #[prost(bool, tag = "13")]
    pub stdin_once: bool,
    #[prost(bool, tag = "14")]
    pub tty: bool,
    #[prost(message, optional, tag = "15")]
    pub linux: Option<LinuxContainerConfig>,
}

/// `CreateContainerRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "2")]
    pub config: Option<ContainerConfig>,
    #[prost(message, optional, tag = "3")]
    pub sandbox_config: Option<PodSandboxConfig>,
}

/// `CreateContainerResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerResponse {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

/// `StartContainerRequest`, `RemoveContainerRequest`: the container id at 1 (and
/// `ContainerStatusRequest` with `verbose = 2` left false).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerIdRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
}

/// `StopContainerRequest`: the grace period in seconds at 2.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StopContainerRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(int64, tag = "2")]
    pub timeout: i64,
}

/// `ContainerStatus`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatus {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(enumeration = "ContainerState", tag = "3")]
    pub state: i32,
    #[prost(int64, tag = "4")]
    pub created_at: i64,
    #[prost(int64, tag = "5")]
    pub started_at: i64,
    #[prost(int64, tag = "6")]
    pub finished_at: i64,
    #[prost(int32, tag = "7")]
    pub exit_code: i32,
    #[prost(message, optional, tag = "8")]
    pub image: Option<ImageSpec>,
    #[prost(string, tag = "9")]
    pub image_ref: String,
    #[prost(string, tag = "10")]
    pub reason: String,
    #[prost(string, tag = "11")]
    pub message: String,
    #[prost(map = "string, string", tag = "12")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "13")]
    pub annotations: HashMap<String, String>,
    #[prost(message, repeated, tag = "14")]
    pub mounts: Vec<Mount>,
    #[prost(string, tag = "15")]
    pub log_path: String,
    /// The resources the runtime applied (containerd 1.6.9 and later report them); `None`
    /// from an older runtime.
    #[prost(message, optional, tag = "16")]
    pub resources: Option<ContainerResources>,
    #[prost(string, tag = "17")]
    pub image_id: String,
}

/// `ContainerResources` (the Windows resources, field 2, unread).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    #[prost(message, optional, tag = "1")]
    pub linux: Option<LinuxContainerResources>,
}

/// `UpdateContainerResourcesRequest`: new CPU and memory for a running container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateContainerResourcesRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(message, optional, tag = "2")]
    pub linux: Option<LinuxContainerResources>,
    #[prost(map = "string, string", tag = "4")]
    pub annotations: HashMap<String, String>,
}

/// `UpdateContainerResourcesResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateContainerResourcesResponse {}

/// `ContainerStatusResponse` (the verbose `info` unread).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<ContainerStatus>,
}

/// `ContainerStateValue`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerStateValue {
    #[prost(enumeration = "ContainerState", tag = "1")]
    pub state: i32,
}

/// `ContainerFilter`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub state: Option<ContainerStateValue>,
    #[prost(string, tag = "3")]
    pub pod_sandbox_id: String,
    #[prost(map = "string, string", tag = "4")]
    pub label_selector: HashMap<String, String>,
}

/// `ListContainersRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<ContainerFilter>,
}

/// `Container`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    #[prost(message, optional, tag = "3")]
    pub metadata: Option<ContainerMetadata>,
    #[prost(message, optional, tag = "4")]
    pub image: Option<ImageSpec>,
    #[prost(string, tag = "5")]
    pub image_ref: String,
    #[prost(enumeration = "ContainerState", tag = "6")]
    pub state: i32,
    #[prost(int64, tag = "7")]
    pub created_at: i64,
    #[prost(map = "string, string", tag = "8")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "9")]
    pub annotations: HashMap<String, String>,
}

/// `ListContainersResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListContainersResponse {
    #[prost(message, repeated, tag = "1")]
    pub containers: Vec<Container>,
}

/// `ExecSyncRequest`: the timeout in seconds at 3 (0: none).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecSyncRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(string, repeated, tag = "2")]
    pub cmd: Vec<String>,
    #[prost(int64, tag = "3")]
    pub timeout: i64,
}

/// `ExecSyncResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecSyncResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub stdout: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub stderr: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub exit_code: i32,
}

/// `ContainerStatusRequest` with `verbose = 2` set: the runtime adds its own `info`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VerboseContainerStatusRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(bool, tag = "2")]
    pub verbose: bool,
}

/// `ContainerStatusResponse` and `PodSandboxStatusResponse` read for their verbose `info`
/// alone (at 2 in both; the status at 1 is skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct VerboseInfoResponse {
    #[prost(map = "string, string", tag = "2")]
    pub info: std::collections::HashMap<String, String>,
}
