//! Between the typed requests of [`ContainerRuntime`](nodepulse_actors::ports::ContainerRuntime)
//! and the CRI messages in [`proto`]: pure functions, no I/O. Namespaces follow the kubelet's
//! `NamespacesForPod`: network and IPC from `hostNetwork`/`hostIPC`, PID from `hostPID`, then
//! `shareProcessNamespace`, else per container (or an ephemeral container's target's); the
//! user namespace as the pod's sandbox config names it.

use std::{collections::HashMap, path::Path};

use nodepulse_actors::ports::{
    ContainerConfig, ContainerFilter, ContainerState, ContainerStatus, ContainerSummary, IdMapping,
    ImageInfo, ImageMount, Labels, LinuxResources, Mount, MountPropagation, PortMapping,
    ProfileKind, Protocol, PullAuth, RuntimeHandler, SandboxConfig, SandboxFilter, SandboxMetadata,
    SandboxState, SandboxStatus, SandboxSummary, SeLinuxOptions, SecurityContext, SecurityProfile,
    UserNamespace,
};

use super::proto;

pub(super) fn map(labels: &Labels) -> HashMap<String, String> {
    labels.clone().into_iter().collect()
}

pub(super) fn labels(map: HashMap<String, String>) -> Labels {
    map.into_iter().collect()
}

fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn int64(value: Option<i64>) -> Option<proto::Int64Value> {
    value.map(|value| proto::Int64Value { value })
}

/// The kubelet's `NamespacesForPod`, and `generateLinuxContainerConfig`'s PID target: a
/// container with a target joins it only where the pod gives each container its own PID
/// namespace.
fn namespaces(sandbox: &SandboxConfig, pid_target: Option<&str>) -> proto::NamespaceOption {
    use proto::NamespaceMode::{Container, Node, Pod, Target};
    let node_or_pod = |host| if host { Node } else { Pod };
    let pid = if sandbox.host_pid {
        Node
    } else if sandbox.share_process_namespace {
        Pod
    } else {
        Container
    };
    let (pid, target_id) = match (pid, pid_target) {
        (Container, Some(target)) => (Target, target.to_owned()),
        (pid, _) => (pid, String::new()),
    };
    proto::NamespaceOption {
        network: node_or_pod(sandbox.host_network).into(),
        pid: pid.into(),
        ipc: node_or_pod(sandbox.host_ipc).into(),
        target_id,
        userns_options: sandbox.user_namespace.as_ref().map(user_namespace),
    }
}

fn user_namespace(namespace: &UserNamespace) -> proto::UserNamespace {
    let mappings = |list: &[IdMapping]| {
        list.iter()
            .map(|mapping| proto::IdMapping {
                host_id: mapping.host_id,
                container_id: mapping.container_id,
                length: mapping.length,
            })
            .collect()
    };
    match namespace {
        UserNamespace::Node => proto::UserNamespace {
            mode: proto::NamespaceMode::Node.into(),
            ..proto::UserNamespace::default()
        },
        UserNamespace::Pod { uids, gids } => proto::UserNamespace {
            mode: proto::NamespaceMode::Pod.into(),
            uids: mappings(uids),
            gids: mappings(gids),
        },
    }
}

/// A handler of CRI `Status`; one without features can do neither.
pub(super) fn runtime_handler(handler: proto::RuntimeHandler) -> RuntimeHandler {
    let features = handler.features.unwrap_or_default();
    RuntimeHandler {
        name: handler.name,
        supports_recursive_read_only_mounts: features.recursive_read_only_mounts,
        supports_user_namespaces: features.user_namespaces,
    }
}

fn port_mapping(port: &PortMapping) -> proto::PortMapping {
    let protocol = match port.protocol {
        Protocol::Tcp => proto::Protocol::Tcp,
        Protocol::Udp => proto::Protocol::Udp,
        Protocol::Sctp => proto::Protocol::Sctp,
    };
    proto::PortMapping {
        protocol: protocol.into(),
        container_port: port.container_port,
        host_port: port.host_port,
        host_ip: port.host_ip.clone(),
    }
}

fn sandbox_metadata(metadata: &SandboxMetadata) -> proto::PodSandboxMetadata {
    proto::PodSandboxMetadata {
        name: metadata.name.clone(),
        uid: metadata.uid.clone(),
        namespace: metadata.namespace.clone(),
        attempt: metadata.attempt,
    }
}

pub(super) fn metadata_of(metadata: Option<proto::PodSandboxMetadata>) -> SandboxMetadata {
    let metadata = metadata.unwrap_or_default();
    SandboxMetadata {
        name: metadata.name,
        uid: metadata.uid,
        namespace: metadata.namespace,
        attempt: metadata.attempt,
    }
}

pub(super) fn sandbox_config(config: &SandboxConfig) -> proto::PodSandboxConfig {
    let security = &config.security;
    proto::PodSandboxConfig {
        metadata: Some(sandbox_metadata(&config.metadata)),
        hostname: config.hostname.clone(),
        log_directory: path(&config.log_directory),
        dns_config: config.dns.as_ref().map(|dns| proto::DnsConfig {
            servers: dns.servers.clone(),
            searches: dns.searches.clone(),
            options: dns.options.clone(),
        }),
        port_mappings: config.port_mappings.iter().map(port_mapping).collect(),
        labels: map(&config.labels),
        annotations: map(&config.annotations),
        linux: Some(proto::LinuxPodSandboxConfig {
            cgroup_parent: config.cgroup_parent.clone(),
            security_context: Some(proto::LinuxSandboxSecurityContext {
                namespace_options: Some(namespaces(config, None)),
                run_as_user: int64(security.run_as_user),
                readonly_rootfs: security.readonly_rootfs,
                supplemental_groups: security.supplemental_groups.clone(),
                privileged: security.privileged,
                run_as_group: int64(security.run_as_group),
                selinux_options: security.selinux.as_ref().map(selinux),
                seccomp: security.seccomp.as_ref().map(profile),
                apparmor: security.apparmor.as_ref().map(profile),
            }),
            sysctls: map(&config.sysctls),
        }),
    }
}

fn profile(profile: &SecurityProfile) -> proto::SecurityProfile {
    let kind = match profile.kind {
        ProfileKind::RuntimeDefault => proto::ProfileType::RuntimeDefault,
        ProfileKind::Unconfined => proto::ProfileType::Unconfined,
        ProfileKind::Localhost => proto::ProfileType::Localhost,
    };
    proto::SecurityProfile {
        profile_type: kind as i32,
        localhost_ref: profile.localhost_ref.clone(),
    }
}

/// The AppArmor profile in the deprecated string form the kubelet still sends beside the
/// field (`getAppArmorProfile`), for runtimes older than the field.
fn deprecated_apparmor(profile: &SecurityProfile) -> String {
    match profile.kind {
        ProfileKind::RuntimeDefault => "runtime/default".to_owned(),
        ProfileKind::Unconfined => "unconfined".to_owned(),
        ProfileKind::Localhost => format!("localhost/{}", profile.localhost_ref),
    }
}

fn selinux(options: &SeLinuxOptions) -> proto::SeLinuxOption {
    proto::SeLinuxOption {
        user: options.user.clone(),
        role: options.role.clone(),
        r#type: options.r#type.clone(),
        level: options.level.clone(),
    }
}

fn container_security(
    security: &SecurityContext,
    namespace_options: proto::NamespaceOption,
) -> proto::LinuxContainerSecurityContext {
    proto::LinuxContainerSecurityContext {
        capabilities: Some(proto::Capability {
            add_capabilities: security.add_capabilities.clone(),
            drop_capabilities: security.drop_capabilities.clone(),
        }),
        privileged: security.privileged,
        namespace_options: Some(namespace_options),
        run_as_user: int64(security.run_as_user),
        readonly_rootfs: security.readonly_rootfs,
        supplemental_groups: security.supplemental_groups.clone(),
        no_new_privs: security.no_new_privs,
        run_as_group: int64(security.run_as_group),
        selinux_options: security.selinux.as_ref().map(selinux),
        apparmor_profile: security
            .apparmor
            .as_ref()
            .map(deprecated_apparmor)
            .unwrap_or_default(),
        masked_paths: security.masked_paths.clone(),
        readonly_paths: security.readonly_paths.clone(),
        seccomp: security.seccomp.as_ref().map(profile),
        apparmor: security.apparmor.as_ref().map(profile),
    }
}

/// CreateContainer's config; `oom_score_adj` is the value already clamped by the caller.
pub(super) fn container_config(
    config: &ContainerConfig,
    sandbox: &SandboxConfig,
    oom_score_adj: Option<i64>,
) -> proto::ContainerConfig {
    proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata {
            name: config.name.clone(),
            attempt: config.attempt,
        }),
        image: Some(proto::ImageSpec {
            user_specified_image: config.user_specified_image.clone(),
            ..image_spec(&config.image)
        }),
        command: config.command.clone(),
        args: config.args.clone(),
        working_dir: config.working_dir.clone(),
        envs: config
            .envs
            .iter()
            .map(|(key, value)| proto::KeyValue {
                key: key.clone(),
                value: value.clone().into_bytes(),
            })
            .collect(),
        mounts: config
            .mounts
            .iter()
            .map(|mount| proto::Mount {
                container_path: path(&mount.container_path),
                host_path: path(&mount.host_path),
                readonly: mount.readonly,
                recursive_read_only: mount.recursive_read_only,
                image: mount.image.as_ref().map(|image| proto::ImageSpec {
                    annotations: map(&image.annotations),
                    user_specified_image: image.user_specified_image.clone(),
                    ..image_spec(&image.image)
                }),
                image_sub_path: (mount.image.as_ref())
                    .map(|image| image.sub_path.clone())
                    .unwrap_or_default(),
                selinux_relabel: false,
                propagation: match mount.propagation {
                    MountPropagation::Private => proto::MountPropagation::PropagationPrivate,
                    MountPropagation::HostToContainer => {
                        proto::MountPropagation::PropagationHostToContainer
                    }
                    MountPropagation::Bidirectional => {
                        proto::MountPropagation::PropagationBidirectional
                    }
                }
                .into(),
            })
            .collect(),
        labels: map(&config.labels),
        annotations: map(&config.annotations),
        log_path: path(&config.log_path),
        stdin: config.stdin,
        stdin_once: config.stdin_once,
        tty: config.tty,
        linux: Some(proto::LinuxContainerConfig {
            resources: config
                .resources
                .as_ref()
                .map(|resources| linux_resources(resources, oom_score_adj)),
            security_context: Some(container_security(
                &config.security,
                namespaces(sandbox, config.pid_target.as_deref()),
            )),
        }),
    }
}

/// CPU and memory as CRI Linux resources; `oom_score_adj` the one asked for unless overridden
/// (by what the process may set).
pub(super) fn linux_resources(
    resources: &LinuxResources,
    oom_score_adj: Option<i64>,
) -> proto::LinuxContainerResources {
    proto::LinuxContainerResources {
        cpu_period: resources.cpu_period,
        cpu_quota: resources.cpu_quota,
        cpu_shares: resources.cpu_shares,
        memory_limit_in_bytes: resources.memory_limit_in_bytes,
        oom_score_adj: oom_score_adj.unwrap_or(resources.oom_score_adj),
        memory_swap_limit_in_bytes: 0,
    }
}

pub(super) fn image_spec(image: &str) -> proto::ImageSpec {
    proto::ImageSpec {
        image: image.to_owned(),
        ..proto::ImageSpec::default()
    }
}

fn sandbox_state(state: i32) -> SandboxState {
    match proto::PodSandboxState::try_from(state) {
        Ok(proto::PodSandboxState::SandboxReady) => SandboxState::Ready,
        _ => SandboxState::NotReady,
    }
}

pub(super) fn sandbox_status(status: proto::PodSandboxStatus) -> SandboxStatus {
    let network = status.network.unwrap_or_default();
    let ips = std::iter::once(network.ip)
        .chain(network.additional_ips.into_iter().map(|ip| ip.ip))
        .filter(|ip| !ip.is_empty())
        .collect();
    SandboxStatus {
        id: status.id,
        metadata: metadata_of(status.metadata),
        state: sandbox_state(status.state),
        created_at: status.created_at,
        ips,
        labels: labels(status.labels),
        annotations: labels(status.annotations),
    }
}

pub(super) fn sandbox_summary(sandbox: proto::PodSandbox) -> SandboxSummary {
    SandboxSummary {
        id: sandbox.id,
        metadata: metadata_of(sandbox.metadata),
        state: sandbox_state(sandbox.state),
        created_at: sandbox.created_at,
        labels: labels(sandbox.labels),
        annotations: labels(sandbox.annotations),
    }
}

pub(super) fn sandbox_filter(filter: SandboxFilter) -> proto::PodSandboxFilter {
    proto::PodSandboxFilter {
        id: filter.id.unwrap_or_default(),
        state: filter.state.map(|state| proto::PodSandboxStateValue {
            state: match state {
                SandboxState::Ready => proto::PodSandboxState::SandboxReady,
                SandboxState::NotReady => proto::PodSandboxState::SandboxNotready,
            }
            .into(),
        }),
        label_selector: map(&filter.labels),
    }
}

fn container_state(state: i32) -> ContainerState {
    match proto::ContainerState::try_from(state) {
        Ok(proto::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(proto::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(proto::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

fn container_state_value(state: ContainerState) -> proto::ContainerStateValue {
    let state = match state {
        ContainerState::Created => proto::ContainerState::ContainerCreated,
        ContainerState::Running => proto::ContainerState::ContainerRunning,
        ContainerState::Exited => proto::ContainerState::ContainerExited,
        ContainerState::Unknown => proto::ContainerState::ContainerUnknown,
    };
    proto::ContainerStateValue {
        state: state.into(),
    }
}

pub(super) fn container_status(status: proto::ContainerStatus) -> ContainerStatus {
    let metadata = status.metadata.unwrap_or_default();
    ContainerStatus {
        id: status.id,
        name: metadata.name,
        attempt: metadata.attempt,
        state: container_state(status.state),
        created_at: status.created_at,
        started_at: status.started_at,
        finished_at: status.finished_at,
        exit_code: status.exit_code,
        image: status.image.map(|image| image.image).unwrap_or_default(),
        image_ref: status.image_ref,
        reason: status.reason,
        message: status.message,
        labels: labels(status.labels),
        annotations: labels(status.annotations),
        log_path: status.log_path.into(),
        resources: status
            .resources
            .and_then(|resources| resources.linux)
            .map(|linux| LinuxResources {
                cpu_period: linux.cpu_period,
                cpu_quota: linux.cpu_quota,
                cpu_shares: linux.cpu_shares,
                memory_limit_in_bytes: linux.memory_limit_in_bytes,
                oom_score_adj: 0,
            }),
        mounts: status
            .mounts
            .into_iter()
            .map(|mount| Mount {
                propagation: match mount.propagation() {
                    proto::MountPropagation::PropagationHostToContainer => {
                        MountPropagation::HostToContainer
                    }
                    proto::MountPropagation::PropagationBidirectional => {
                        MountPropagation::Bidirectional
                    }
                    proto::MountPropagation::PropagationPrivate => MountPropagation::Private,
                },
                readonly: mount.readonly,
                recursive_read_only: mount.recursive_read_only,
                container_path: mount.container_path.into(),
                host_path: mount.host_path.into(),
                image: mount.image.map(|image| ImageMount {
                    image: image.image,
                    user_specified_image: image.user_specified_image,
                    annotations: labels(image.annotations),
                    sub_path: mount.image_sub_path,
                }),
            })
            .collect(),
    }
}

pub(super) fn container_summary(container: proto::Container) -> ContainerSummary {
    let metadata = container.metadata.unwrap_or_default();
    ContainerSummary {
        id: container.id,
        sandbox_id: container.pod_sandbox_id,
        name: metadata.name,
        attempt: metadata.attempt,
        image: container.image.map(|image| image.image).unwrap_or_default(),
        image_ref: container.image_ref,
        state: container_state(container.state),
        created_at: container.created_at,
        labels: labels(container.labels),
        annotations: labels(container.annotations),
    }
}

pub(super) fn container_filter(filter: ContainerFilter) -> proto::ContainerFilter {
    proto::ContainerFilter {
        id: filter.id.unwrap_or_default(),
        state: filter.state.map(container_state_value),
        pod_sandbox_id: filter.sandbox_id.unwrap_or_default(),
        label_selector: map(&filter.labels),
    }
}

pub(super) fn image_info(image: proto::Image) -> ImageInfo {
    ImageInfo {
        id: image.id,
        repo_tags: image.repo_tags,
        repo_digests: image.repo_digests,
        size_bytes: image.size,
        uid: image.uid.map(|uid| uid.value),
        username: image.username,
        pinned: image.pinned,
    }
}

pub(super) fn auth_config(auth: PullAuth) -> proto::AuthConfig {
    proto::AuthConfig {
        username: auth.username,
        password: auth.password,
        auth: auth.auth,
        server_address: auth.server_address,
        identity_token: auth.identity_token,
        registry_token: auth.registry_token,
    }
}
