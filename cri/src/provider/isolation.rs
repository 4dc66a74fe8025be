//! The isolation a container's CRI security context carries, as the kubelet's
//! `determineEffectiveSecurityContext` and `helpers.go` build it: the seccomp profile (the
//! container's field over the pod's, `seccompDefault` when neither names one, `Localhost`
//! profiles under `<rootDir>/seccomp`), the AppArmor profile, SELinux options, and the paths
//! `procMount` masks or makes read-only. Pure.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod, SeccompProfile};

use nodepulse_actors::{
    pods::apparmor,
    ports::{ProfileKind, SeLinuxOptions, SecurityProfile},
};

/// What the node decides once for every container: its configuration's seccomp choices and
/// the masked paths of `procMount: Default`, which depend on the node's CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsolationSettings {
    /// `seccompDefault`: a container that names no profile gets `RuntimeDefault` rather than
    /// `Unconfined` (the kubelet's default: false).
    pub seccomp_default: bool,
    /// `<rootDir>/seccomp`: where `Localhost` profiles are found.
    pub seccomp_root: PathBuf,
    /// The kubelet's masked paths for `procMount: Default`.
    pub masked_paths: Vec<String>,
}

impl IsolationSettings {
    /// `sys` is the node's `/sys`, read for the CPUs' `thermal_throttle` directories.
    pub fn new(root_dir: &Path, seccomp_default: bool, sys: &Path) -> Self {
        Self {
            seccomp_default,
            seccomp_root: root_dir.join("seccomp"),
            masked_paths: default_masked_paths(sys),
        }
    }
}

/// Why a container's profiles cannot be built; the kubelet's messages, shown as the
/// container's `CreateContainerConfigError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsolationError {
    #[error("localhostProfile must be set if seccompProfile type is Localhost.")]
    MissingSeccompLocalhostProfile,
    #[error("missing localhost apparmor profile name")]
    MissingAppArmorLocalhostProfile,
    #[error("unknown apparmor profile type: {0:?}")]
    UnknownAppArmorType(String),
}

/// The kubelet's masked paths for `procMount: Default` (kept in step with moby's); the
/// per-CPU `thermal_throttle` directories that exist on the node follow them.
const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];
const UNMASKED_PROC_MOUNT: &str = "Unmasked";

/// `fieldSeccompProfile`: a named profile; `Localhost` joined under the profile root.
fn field_seccomp(
    profile: &SeccompProfile,
    settings: &IsolationSettings,
) -> Result<SecurityProfile, IsolationError> {
    Ok(match profile.type_.as_str() {
        "RuntimeDefault" => SecurityProfile::of(ProfileKind::RuntimeDefault),
        "Localhost" => {
            let name = profile
                .localhost_profile
                .as_deref()
                .filter(|name| !name.is_empty())
                .ok_or(IsolationError::MissingSeccompLocalhostProfile)?;
            SecurityProfile {
                kind: ProfileKind::Localhost,
                localhost_ref: settings.seccomp_root.join(name).display().to_string(),
            }
        }
        // Unconfined, and any type the API would not let through.
        _ => SecurityProfile::of(ProfileKind::Unconfined),
    })
}

/// `getSeccompProfile`: the container's field, else the pod's, else `seccompDefault`'s choice.
/// (The annotations are no longer read: the API server turned them into fields long ago.)
pub fn seccomp_profile(
    pod: &Pod,
    container: Option<&SeccompProfile>,
    settings: &IsolationSettings,
) -> Result<SecurityProfile, IsolationError> {
    let pod_field = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.security_context.as_ref())
        .and_then(|context| context.seccomp_profile.as_ref());
    match container.or(pod_field) {
        Some(profile) => field_seccomp(profile, settings),
        None if settings.seccomp_default => Ok(SecurityProfile::of(ProfileKind::RuntimeDefault)),
        None => Ok(SecurityProfile::of(ProfileKind::Unconfined)),
    }
}

/// `getAppArmorProfile`: `None` when nothing names a profile (the runtime's default).
pub fn apparmor_profile(
    pod: &Pod,
    container: &str,
    own: Option<&AppArmorProfile>,
) -> Result<Option<SecurityProfile>, IsolationError> {
    let Some(profile) = apparmor::profile(pod, container, own) else {
        return Ok(None);
    };
    let kind = match profile.type_.as_str() {
        apparmor::RUNTIME_DEFAULT => ProfileKind::RuntimeDefault,
        apparmor::UNCONFINED => ProfileKind::Unconfined,
        apparmor::LOCALHOST => ProfileKind::Localhost,
        other => return Err(IsolationError::UnknownAppArmorType(other.to_owned())),
    };
    let localhost_ref = match kind {
        ProfileKind::Localhost => profile
            .localhost_profile
            .ok_or(IsolationError::MissingAppArmorLocalhostProfile)?,
        _ => String::new(),
    };
    Ok(Some(SecurityProfile {
        kind,
        localhost_ref,
    }))
}

fn selinux(options: &k8s_openapi::api::core::v1::SELinuxOptions) -> SeLinuxOptions {
    SeLinuxOptions {
        user: options.user.clone().unwrap_or_default(),
        role: options.role.clone().unwrap_or_default(),
        r#type: options.type_.clone().unwrap_or_default(),
        level: options.level.clone().unwrap_or_default(),
    }
}

/// The pod's `seLinuxOptions` (the sandbox's), passed through.
pub fn pod_selinux(pod: &Pod) -> Option<SeLinuxOptions> {
    let context = pod.spec.as_ref()?.security_context.as_ref()?;
    context.se_linux_options.as_ref().map(selinux)
}

/// The container's `seLinuxOptions`, else the pod's (`DetermineEffectiveSecurityContext`).
pub fn container_selinux(pod: &Pod, container: &Container) -> Option<SeLinuxOptions> {
    container
        .security_context
        .as_ref()
        .and_then(|context| context.se_linux_options.as_ref())
        .map(selinux)
        .or_else(|| pod_selinux(pod))
}

/// (masked, read-only) paths for a container's `procMount`: none for `Unmasked`, the kubelet's
/// lists otherwise.
pub fn proc_paths(
    proc_mount: Option<&str>,
    settings: &IsolationSettings,
) -> (Vec<String>, Vec<String>) {
    if proc_mount == Some(UNMASKED_PROC_MOUNT) {
        return (Vec::new(), Vec::new());
    }
    let readonly = DEFAULT_READONLY_PATHS
        .iter()
        .map(|&p| p.to_owned())
        .collect();
    (settings.masked_paths.clone(), readonly)
}

/// The kubelet's `defaultMaskedPaths`: its list, then each possible CPU's `thermal_throttle`
/// directory that exists.
fn default_masked_paths(sys: &Path) -> Vec<String> {
    let mut masked: Vec<String> = DEFAULT_MASKED_PATHS.iter().map(|&p| p.to_owned()).collect();
    masked.extend(possible_cpus(sys).into_iter().filter_map(|cpu| {
        let path = format!("devices/system/cpu/cpu{cpu}/thermal_throttle");
        sys.join(&path).exists().then(|| format!("/sys/{path}"))
    }));
    masked
}

/// The CPUs `/sys/devices/system/cpu/possible` lists (`0-3,5`), as the kubelet's
/// `possibleCPUs`; none when it cannot be read.
fn possible_cpus(sys: &Path) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(sys.join("devices/system/cpu/possible")) else {
        return Vec::new();
    };
    let mut cpus = Vec::new();
    for range in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (Ok(first), Ok(last)) = (first.parse::<u32>(), last.parse::<u32>()) else {
            return Vec::new();
        };
        cpus.extend(first..=last);
    }
    cpus
}
