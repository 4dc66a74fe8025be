//! CRI `runtime.v1` pod sandbox messages: the config RunPodSandbox takes (and CreateContainer
//! and PullImage repeat), its status and listing. Field numbers are those of cri-api's
//! `api.proto`; only the fields the kubelet sets or reads are here.

use std::collections::HashMap;

use super::Int64Value;

/// `PodSandboxState`: `SANDBOX_READY = 0`, `SANDBOX_NOTREADY = 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum PodSandboxState {
    SandboxReady = 0,
    SandboxNotready = 1,
}

/// `NamespaceMode`: `POD = 0`, `CONTAINER = 1`, `NODE = 2`, `TARGET = 3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NamespaceMode {
    Pod = 0,
    Container = 1,
    Node = 2,
    /// Another container's namespace, named by `NamespaceOption.target_id`.
    Target = 3,
}

/// `Protocol`: `TCP = 0`, `UDP = 1`, `SCTP = 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Protocol {
    Tcp = 0,
    Udp = 1,
    Sctp = 2,
}

/// `PodSandboxMetadata`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxMetadata {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub uid: String,
    #[prost(string, tag = "3")]
    pub namespace: String,
    #[prost(uint32, tag = "4")]
    pub attempt: u32,
}

/// `DNSConfig`
#[derive(Clone, PartialEq, prost::Message)]
pub struct DnsConfig {
    #[prost(string, repeated, tag = "1")]
    pub servers: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub searches: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub options: Vec<String>,
}

/// `PortMapping`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PortMapping {
    #[prost(enumeration = "Protocol", tag = "1")]
    pub protocol: i32,
    #[prost(int32, tag = "2")]
    pub container_port: i32,
    #[prost(int32, tag = "3")]
    pub host_port: i32,
    #[prost(string, tag = "4")]
    pub host_ip: String,
}

/// `NamespaceOption` (network, pid, ipc, the PID target, the user namespace).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamespaceOption {
    #[prost(enumeration = "NamespaceMode", tag = "1")]
    pub network: i32,
    #[prost(enumeration = "NamespaceMode", tag = "2")]
    pub pid: i32,
    #[prost(enumeration = "NamespaceMode", tag = "3")]
    pub ipc: i32,
    /// The container whose namespace a `TARGET` mode joins.
    #[prost(string, tag = "4")]
    pub target_id: String,
    /// `NODE` for the host's user namespace, `POD` with the pod's ID mappings. A runtime
    /// that predates the field (containerd 1.6) skips it, which is why the kubelet asks the
    /// runtime's handlers first.
    #[prost(message, optional, tag = "5")]
    pub userns_options: Option<UserNamespace>,
}

/// `UserNamespace { NamespaceMode mode = 1; repeated IDMapping uids = 2; repeated IDMapping gids = 3; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct UserNamespace {
    #[prost(enumeration = "NamespaceMode", tag = "1")]
    pub mode: i32,
    #[prost(message, repeated, tag = "2")]
    pub uids: Vec<IdMapping>,
    #[prost(message, repeated, tag = "3")]
    pub gids: Vec<IdMapping>,
}

/// `IDMapping { uint32 host_id = 1; uint32 container_id = 2; uint32 length = 3; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct IdMapping {
    #[prost(uint32, tag = "1")]
    pub host_id: u32,
    #[prost(uint32, tag = "2")]
    pub container_id: u32,
    #[prost(uint32, tag = "3")]
    pub length: u32,
}

/// `SecurityProfile.ProfileType`: `RuntimeDefault = 0`, `Unconfined = 1`, `Localhost = 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ProfileType {
    RuntimeDefault = 0,
    Unconfined = 1,
    Localhost = 2,
}

/// `SecurityProfile`: a seccomp or AppArmor profile.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityProfile {
    #[prost(enumeration = "ProfileType", tag = "1")]
    pub profile_type: i32,
    #[prost(string, tag = "2")]
    pub localhost_ref: String,
}

/// `SELinuxOption`
#[derive(Clone, PartialEq, prost::Message)]
pub struct SeLinuxOption {
    #[prost(string, tag = "1")]
    pub user: String,
    #[prost(string, tag = "2")]
    pub role: String,
    #[prost(string, tag = "3")]
    pub r#type: String,
    #[prost(string, tag = "4")]
    pub level: String,
}

/// `LinuxSandboxSecurityContext`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxSandboxSecurityContext {
    #[prost(message, optional, tag = "1")]
    pub namespace_options: Option<NamespaceOption>,
    #[prost(message, optional, tag = "2")]
    pub selinux_options: Option<SeLinuxOption>,
    #[prost(message, optional, tag = "3")]
    pub run_as_user: Option<Int64Value>,
    #[prost(bool, tag = "4")]
    pub readonly_rootfs: bool,
    #[prost(int64, repeated, tag = "5")]
    pub supplemental_groups: Vec<i64>,
    #[prost(bool, tag = "6")]
    pub privileged: bool,
    #[prost(message, optional, tag = "8")]
    pub run_as_group: Option<Int64Value>,
    #[prost(message, optional, tag = "9")]
    pub seccomp: Option<SecurityProfile>,
    #[prost(message, optional, tag = "10")]
    pub apparmor: Option<SecurityProfile>,
}

/// `LinuxPodSandboxConfig`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxPodSandboxConfig {
    #[prost(string, tag = "1")]
    pub cgroup_parent: String,
    #[prost(message, optional, tag = "2")]
    pub security_context: Option<LinuxSandboxSecurityContext>,
    #[prost(map = "string, string", tag = "3")]
    pub sysctls: HashMap<String, String>,
}

/// `PodSandboxConfig`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxConfig {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(string, tag = "2")]
    pub hostname: String,
    #[prost(string, tag = "3")]
    pub log_directory: String,
    #[prost(message, optional, tag = "4")]
    pub dns_config: Option<DnsConfig>,
    #[prost(message, repeated, tag = "5")]
    pub port_mappings: Vec<PortMapping>,
    #[prost(map = "string, string", tag = "6")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "7")]
    pub annotations: HashMap<String, String>,
    #[prost(message, optional, tag = "8")]
    pub linux: Option<LinuxPodSandboxConfig>,
}

/// `RunPodSandboxRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    pub config: Option<PodSandboxConfig>,
    #[prost(string, tag = "2")]
    pub runtime_handler: String,
}

/// `RunPodSandboxResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunPodSandboxResponse {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// `StopPodSandboxRequest`, `RemovePodSandboxRequest`: the sandbox id at 1.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxIdRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
}

/// `PodSandboxStatusRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatusRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    #[prost(bool, tag = "2")]
    pub verbose: bool,
}

/// `PodIP`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodIp {
    #[prost(string, tag = "1")]
    pub ip: String,
}

/// `PodSandboxNetworkStatus`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxNetworkStatus {
    #[prost(string, tag = "1")]
    pub ip: String,
    #[prost(message, repeated, tag = "2")]
    pub additional_ips: Vec<PodIp>,
}

/// `PodSandboxStatus`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatus {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(enumeration = "PodSandboxState", tag = "3")]
    pub state: i32,
    #[prost(int64, tag = "4")]
    pub created_at: i64,
    #[prost(message, optional, tag = "5")]
    pub network: Option<PodSandboxNetworkStatus>,
    #[prost(map = "string, string", tag = "7")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "8")]
    pub annotations: HashMap<String, String>,
}

/// `PodSandboxStatusResponse` (the verbose `info` and embedded container statuses unread).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<PodSandboxStatus>,
}

/// `PodSandboxStateValue`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxStateValue {
    #[prost(enumeration = "PodSandboxState", tag = "1")]
    pub state: i32,
}

/// `PodSandboxFilter`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandboxFilter {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub state: Option<PodSandboxStateValue>,
    #[prost(map = "string, string", tag = "3")]
    pub label_selector: HashMap<String, String>,
}

/// `ListPodSandboxRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<PodSandboxFilter>,
}

/// `PodSandbox`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<PodSandboxMetadata>,
    #[prost(enumeration = "PodSandboxState", tag = "3")]
    pub state: i32,
    #[prost(int64, tag = "4")]
    pub created_at: i64,
    #[prost(map = "string, string", tag = "5")]
    pub labels: HashMap<String, String>,
    #[prost(map = "string, string", tag = "6")]
    pub annotations: HashMap<String, String>,
}

/// `ListPodSandboxResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodSandboxResponse {
    #[prost(message, repeated, tag = "1")]
    pub items: Vec<PodSandbox>,
}

/// The empty answers of StopPodSandbox, RemovePodSandbox, StartContainer, StopContainer and
/// RemoveContainer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}
