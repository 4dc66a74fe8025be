//! The container runtime as the CRI pod provider reaches it: sandboxes, containers, exec and
//! images, in typed requests and answers rather than CRI messages, so the provider can be
//! tested against a fake. The daemon implements it over the runtime's socket (`CriClient`);
//! every call is bounded by `runtimeRequestTimeout` (ExecSync by that plus its own timeout).

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use futures::{future::BoxFuture, stream::BoxStream};

use super::RuntimeError;

/// Labels and annotations, ordered so equal maps compare and print alike.
pub type Labels = BTreeMap<String, String>;

/// Which pod a sandbox belongs to (CRI `PodSandboxMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxMetadata {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
}

/// The resolv.conf the runtime writes for the sandbox (CRI `DNSConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

/// A container port published on the host (CRI `PortMapping`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
}

/// What RunPodSandbox is given, and what CreateContainer and PullImage repeat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxConfig {
    pub metadata: SandboxMetadata,
    pub hostname: String,
    /// `/var/log/pods/<namespace>_<name>_<uid>`; container log paths are relative to it.
    pub log_directory: PathBuf,
    /// `None` for `dnsPolicy: None` without a `dnsConfig`: the runtime's default.
    pub dns: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
    pub labels: Labels,
    pub annotations: Labels,
    pub cgroup_parent: String,
    /// `hostNetwork`: the sandbox joins the node's network namespace (no CNI).
    pub host_network: bool,
    /// `hostPID`: the pod's containers see the node's processes.
    pub host_pid: bool,
    /// `hostIPC`: the pod uses the node's IPC namespace.
    pub host_ipc: bool,
    /// `shareProcessNamespace`: one PID namespace for the pod's containers (else one each).
    pub share_process_namespace: bool,
    pub security: SecurityContext,
    /// `securityContext.sysctls`, names with `/` already turned into `.`.
    pub sysctls: Labels,
    /// CRI `NamespaceOption.userns_options`, for the sandbox and each of its containers:
    /// `None` leaves the field out.
    pub user_namespace: Option<UserNamespace>,
}

/// A pod's user namespace as CRI `UserNamespace` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserNamespace {
    /// The host's (`hostUsers` unset or true).
    Node,
    /// Its own, with these UID and GID mappings (`hostUsers: false`).
    Pod {
        uids: Vec<IdMapping>,
        gids: Vec<IdMapping>,
    },
}

/// CRI `IDMapping`: `length` IDs from `container_id` inside map to `host_id` outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdMapping {
    pub host_id: u32,
    pub container_id: u32,
    pub length: u32,
}

/// The Linux security settings the kubelet passes for a sandbox or a container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityContext {
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
    pub privileged: bool,
    pub readonly_rootfs: bool,
    pub add_capabilities: Vec<String>,
    pub drop_capabilities: Vec<String>,
    pub no_new_privs: bool,
    /// The seccomp profile; `None` leaves it to the runtime (the kubelet always sets one).
    pub seccomp: Option<SecurityProfile>,
    /// The AppArmor profile; `None` when the pod names none (the runtime's default applies).
    pub apparmor: Option<SecurityProfile>,
    /// `seLinuxOptions`, passed through as the kubelet does; `None` when the pod sets none.
    pub selinux: Option<SeLinuxOptions>,
    /// Paths the runtime masks (`procMount: Default`: the kubelet's list; `Unmasked`: none).
    pub masked_paths: Vec<String>,
    /// Paths the runtime mounts read-only (as `masked_paths`).
    pub readonly_paths: Vec<String>,
}

/// Which kind of profile a seccomp or AppArmor setting asks for (CRI `SecurityProfile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileKind {
    /// The runtime's own default profile.
    #[default]
    RuntimeDefault,
    Unconfined,
    /// A profile on the node, named by `SecurityProfile::localhost_ref`.
    Localhost,
}

/// A seccomp or AppArmor profile (CRI `SecurityProfile`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityProfile {
    pub kind: ProfileKind,
    /// For `Localhost`: the seccomp profile's absolute path on the node, or the AppArmor
    /// profile's name.
    pub localhost_ref: String,
}

impl SecurityProfile {
    pub fn of(kind: ProfileKind) -> Self {
        Self {
            kind,
            localhost_ref: String::new(),
        }
    }
}

/// SELinux labels for a sandbox or container (CRI `SELinuxOption`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeLinuxOptions {
    pub user: String,
    pub role: String,
    pub r#type: String,
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    Ready,
    NotReady,
}

/// CRI `PodSandboxStatus`: the pod IPs come from here (the runtime's CNI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    pub id: String,
    pub metadata: SandboxMetadata,
    pub state: SandboxState,
    /// Nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// The primary IP first, then the additional ones; empty on the host network.
    pub ips: Vec<String>,
    pub labels: Labels,
    pub annotations: Labels,
}

/// One sandbox of ListPodSandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSummary {
    pub id: String,
    pub metadata: SandboxMetadata,
    pub state: SandboxState,
    pub created_at: i64,
    pub labels: Labels,
    pub annotations: Labels,
}

/// Which sandboxes ListPodSandbox returns; the default lists all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxFilter {
    pub id: Option<String>,
    pub state: Option<SandboxState>,
    pub labels: Labels,
}

/// `volumeMounts[].mountPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MountPropagation {
    /// `None`: rprivate.
    #[default]
    Private,
    /// `HostToContainer`: rslave.
    HostToContainer,
    /// `Bidirectional`: rshared (privileged containers only).
    Bidirectional,
}

/// A host path bind-mounted into a container (CRI `Mount`); the termination message file and
/// `/etc/hosts` are mounts too. An image volume's mount names its image instead, with no host
/// path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mount {
    pub container_path: PathBuf,
    pub host_path: PathBuf,
    pub readonly: bool,
    pub propagation: MountPropagation,
    pub image: Option<ImageMount>,
    /// `recursiveReadOnly` resolved to on: submounts are read-only too.
    pub recursive_read_only: bool,
}

/// The image an image volume mounts (CRI `Mount.image` and `image_sub_path`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageMount {
    /// The image reference PullImage or ImageStatus resolved.
    pub image: String,
    /// The volume's `image.reference` as the pod spec names it.
    pub user_specified_image: String,
    /// The pod's annotations, as the kubelet passes them with every image spec.
    pub annotations: Labels,
    /// `volumeMounts[].subPath`: a path inside the image; empty for its root.
    pub sub_path: String,
}

/// CPU and memory as CRI Linux resources (the kubelet's conversion of requests and limits).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinuxResources {
    pub cpu_period: i64,
    pub cpu_quota: i64,
    pub cpu_shares: i64,
    pub memory_limit_in_bytes: i64,
    /// What the kubelet asks for (-997 for Guaranteed pods); the client may raise it to what
    /// it is allowed to set.
    pub oom_score_adj: i64,
}

/// What CreateContainer is given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    /// The image reference ImageStatus or PullImage resolved.
    pub image: String,
    /// The image as the pod spec names it.
    pub user_specified_image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub labels: Labels,
    pub annotations: Labels,
    /// Relative to the sandbox's log directory (`<name>/<attempt>.log`).
    pub log_path: PathBuf,
    pub resources: Option<LinuxResources>,
    pub security: SecurityContext,
    /// An ephemeral container's `targetContainerName`, as that container's runtime ID: it joins
    /// the target's PID namespace when the pod gives each container its own.
    pub pid_target: Option<String>,
    /// `stdin`, `stdinOnce` and `tty`: an attachable container keeps its stdin open.
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// CRI `ContainerStatus`: times in nanoseconds since the epoch, 0 when not reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    pub id: String,
    pub name: String,
    pub attempt: u32,
    pub state: ContainerState,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub image: String,
    pub image_ref: String,
    /// `Completed`, `Error`, `OOMKilled`, … as the runtime says.
    pub reason: String,
    pub message: String,
    pub labels: Labels,
    pub annotations: Labels,
    pub log_path: PathBuf,
    /// The container's mounts as the runtime reports them (the termination-message file is
    /// found among them by its container path).
    pub mounts: Vec<Mount>,
    /// The CPU and memory the runtime applied, where it reports them (containerd 1.6.9 and
    /// later); `None` from an older runtime. `oom_score_adj` is not read back (0).
    pub resources: Option<LinuxResources>,
}

/// One container of ListContainers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSummary {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub image: String,
    pub image_ref: String,
    pub state: ContainerState,
    pub created_at: i64,
    pub labels: Labels,
    pub annotations: Labels,
}

/// Which containers ListContainers returns; the default lists all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerFilter {
    pub id: Option<String>,
    pub state: Option<ContainerState>,
    pub sandbox_id: Option<String>,
    pub labels: Labels,
}

/// What a command run by ExecSync printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// An image the runtime holds (CRI `Image`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size_bytes: u64,
    pub uid: Option<i64>,
    pub username: String,
    pub pinned: bool,
}

/// Registry credentials from `imagePullSecrets` (CRI `AuthConfig`). `Debug` hides secrets.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct PullAuth {
    pub username: String,
    pub password: String,
    pub auth: String,
    pub server_address: String,
    pub identity_token: String,
    pub registry_token: String,
}

impl fmt::Debug for PullAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullAuth")
            .field("username", &self.username)
            .field("server_address", &self.server_address)
            .finish_non_exhaustive()
    }
}

/// Why a pod call failed. `Runtime` covers the transport (missing socket, unreachable,
/// timed out, any other error status) and may clear up by itself; the others are answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerRuntimeError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The sandbox, container or image named does not exist (gRPC NotFound): retrying
    /// will not help, the caller's view is stale.
    #[error("{method}: not found: {message}")]
    NotFound {
        method: &'static str,
        message: String,
    },
    /// The command ran past its ExecSync timeout (a probe counts this as a failure).
    #[error("command {command:?} timed out after {timeout:?}")]
    ExecTimedOut {
        command: Vec<String>,
        timeout: Duration,
    },
    /// The runtime answered without a field the call needs.
    #[error("{method}: the runtime answered without {field}")]
    Incomplete {
        method: &'static str,
        field: &'static str,
    },
    /// The runtime does not implement the call (gRPC Unimplemented): an older runtime.
    #[error("{method}: not implemented by the runtime")]
    Unimplemented { method: &'static str },
}

/// Something happened to a container (CRI `ContainerEventResponse`): created, started,
/// stopped or removed. Which does not matter to the PLEG; it reads the pod afresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    pub container_id: String,
    /// The UID of the container's pod, from the sandbox status the event carries.
    pub pod_uid: Option<String>,
}

/// The runtime's container events as they happen; an error item ends the stream.
pub type ContainerEvents = BoxStream<'static, ContainerRuntimeResult<ContainerEvent>>;

pub type ContainerRuntimeResult<T> = Result<T, ContainerRuntimeError>;

/// The CRI pod calls. Futures are `'static` so an actor can run them beside its mailbox.
pub trait ContainerRuntime: Send + Sync + 'static {
    /// GetContainerEvents: a subscription to the runtime's container events, open until the
    /// runtime ends it; `Unimplemented` where it has none (containerd before 1.7).
    fn container_events(&self) -> BoxFuture<'static, ContainerRuntimeResult<ContainerEvents>> {
        Box::pin(async {
            Err(ContainerRuntimeError::Unimplemented {
                method: "GetContainerEvents",
            })
        })
    }
    /// RunPodSandbox; the sandbox id. `runtime_handler` empty for the default runtime.
    fn run_pod_sandbox(
        &self,
        config: SandboxConfig,
        runtime_handler: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>>;
    /// StopPodSandbox: every container of it stops, its network is torn down.
    fn stop_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>>;
    /// RemovePodSandbox: the sandbox and its containers are gone.
    fn remove_pod_sandbox(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>>;
    fn pod_sandbox_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<SandboxStatus>>;
    fn list_pod_sandboxes(
        &self,
        filter: SandboxFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<SandboxSummary>>>;
    /// CreateContainer in a running sandbox; the container id.
    fn create_container(
        &self,
        sandbox_id: String,
        config: ContainerConfig,
        sandbox: SandboxConfig,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>>;
    fn start_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>>;
    /// StopContainer: SIGTERM (or the image's stop signal), SIGKILL after `grace`.
    fn stop_container(
        &self,
        id: String,
        grace: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>>;
    fn remove_container(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>>;
    /// UpdateContainerResources: new CPU and memory for a container (an in-place resize).
    /// `Unimplemented` where the runtime has no such call.
    fn update_container_resources(
        &self,
        id: String,
        resources: LinuxResources,
    ) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let _ = (id, resources);
        Box::pin(async {
            Err(ContainerRuntimeError::Unimplemented {
                method: "UpdateContainerResources",
            })
        })
    }
    fn container_status(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ContainerStatus>>;
    fn list_containers(
        &self,
        filter: ContainerFilter,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Vec<ContainerSummary>>>;
    /// ExecSync: `command` in the container, ended after `timeout` (zero: no limit).
    fn exec_sync(
        &self,
        id: String,
        command: Vec<String>,
        timeout: Duration,
    ) -> BoxFuture<'static, ContainerRuntimeResult<ExecOutput>>;
    /// ImageStatus; `None` when the runtime does not have the image.
    fn image_status(
        &self,
        image: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Option<ImageInfo>>>;
    /// PullImage; the image reference (id or digest) the runtime now holds.
    fn pull_image(
        &self,
        image: String,
        auth: Option<PullAuth>,
        sandbox: Option<SandboxConfig>,
    ) -> BoxFuture<'static, ContainerRuntimeResult<String>>;
    /// ReopenContainerLog: the runtime closes the container's log file and opens its
    /// `log_path` anew (after log rotation renamed it); the container must be running.
    /// `Unimplemented` for a runtime that writes no log files (the in-memory one).
    fn reopen_container_log(&self, id: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let _ = id;
        Box::pin(async {
            Err(ContainerRuntimeError::Unimplemented {
                method: "ReopenContainerLog",
            })
        })
    }
    /// RemoveImage (image garbage collection): idempotent, an image already gone is no error.
    /// `Unimplemented` for a runtime that removes nothing (the in-memory one).
    fn remove_image(&self, image: String) -> BoxFuture<'static, ContainerRuntimeResult<()>> {
        let _ = image;
        Box::pin(async {
            Err(ContainerRuntimeError::Unimplemented {
                method: "RemoveImage",
            })
        })
    }
}
