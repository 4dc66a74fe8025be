//! CreateContainer's config as the kubelet's `generateContainerConfig` makes it: command and
//! args `$(VAR)`-expanded against the environment `pods::env` built, working dir, mounts for the volumes the volume manager set up,
//! the termination-message file, CPU and memory as CRI Linux resources with the QoS class's
//! `oom_score_adj`, the security context, and the kubelet's labels and annotations.
//! Pure: the caller creates the termination-message file and passes its path.

use std::{
    collections::{BTreeMap, BTreeSet, hash_map::DefaultHasher},
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    isolation::{self, IsolationError, IsolationSettings},
    sub_path::MountSource,
    view::{
        CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL,
        POD_UID_LABEL, RESTART_COUNT_ANNOTATION, TERMINATION_GRACE_ANNOTATION,
        TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION,
    },
};
use nodepulse_actors::{
    pods::{env::expand_command_and_args, qos_class},
    ports::{ContainerConfig, Labels, LinuxResources, Mount, SecurityContext},
    quantity::{QuantityError, milli_value, value},
};

const CPU_PERIOD: i64 = 100_000;
const MIN_SHARES: i64 = 2;
const MIN_QUOTA: i64 = 1_000;
/// The kubelet's `oom_score_adj` for Guaranteed pods, and BestEffort's.
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
pub const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// The hash the kubelet's annotation carries: of the container's name and image (what a
/// change of restarts the container).
pub fn container_hash(container: &Container) -> String {
    let mut hasher = DefaultHasher::new();
    container.name.hash(&mut hasher);
    container.image.hash(&mut hasher);
    format!("{:x}", hasher.finish() as u32)
}

/// A limit or request of `container` in the unit `scale` gives (`quantity::value` for bytes,
/// `quantity::milli_value` for millicores), exact and rounded up as the API's `Quantity` does.
fn quantity(
    container: &Container,
    limits: bool,
    resource: &str,
    scale: fn(&str) -> Result<i64, QuantityError>,
) -> Option<i64> {
    let resources = container.resources.as_ref()?;
    let map = if limits {
        &resources.limits
    } else {
        &resources.requests
    };
    let value = map.as_ref()?.get(resource)?;
    scale(&value.0).ok()
}

/// `oom_score_adj` by QoS class: Guaranteed -997, BestEffort 1000, Burstable scaled by the
/// memory request against the node's memory, kept within 3..=999.
#[allow(clippy::cast_possible_truncation)]
pub fn oom_score_adj(pod: &Pod, container: &Container, memory_capacity: u64) -> i64 {
    match qos_class(pod) {
        "Guaranteed" => GUARANTEED_OOM_SCORE_ADJ,
        "BestEffort" => BEST_EFFORT_OOM_SCORE_ADJ,
        _ => {
            let request = quantity(container, false, "memory", value).unwrap_or(0);
            let capacity = i128::from(memory_capacity.max(1));
            let share = (1000 * i128::from(request) / capacity).clamp(0, 1000);
            let adj = 1000 - share as i64;
            adj.clamp(
                1000 + GUARANTEED_OOM_SCORE_ADJ,
                BEST_EFFORT_OOM_SCORE_ADJ - 1,
            )
        }
    }
}

/// CPU shares from the request (or the limit, as the API defaults it), a CFS quota from the
/// limit, the memory limit.
pub fn linux_resources(pod: &Pod, container: &Container, memory_capacity: u64) -> LinuxResources {
    let cpu_limit = quantity(container, true, "cpu", milli_value);
    let cpu_request = quantity(container, false, "cpu", milli_value).or(cpu_limit);
    let cpu_shares = cpu_request.map_or(MIN_SHARES, |m| (m * 1024 / 1000).max(MIN_SHARES));
    let memory_limit_in_bytes = quantity(container, true, "memory", value).unwrap_or(0);
    LinuxResources {
        cpu_period: if cpu_limit.is_some() { CPU_PERIOD } else { 0 },
        cpu_quota: cpu_limit.map_or(0, |m| (m * CPU_PERIOD / 1000).max(MIN_QUOTA)),
        cpu_shares,
        memory_limit_in_bytes,
        oom_score_adj: oom_score_adj(pod, container, memory_capacity),
    }
}

/// The container's CRI security context (`determineEffectiveSecurityContext`): users, groups
/// and capabilities, then its isolation (`isolation`): seccomp, AppArmor, SELinux, procMount.
pub(super) fn security(
    pod: &Pod,
    container: &Container,
    settings: &IsolationSettings,
) -> Result<SecurityContext, IsolationError> {
    let pod_context = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let context = container.security_context.clone().unwrap_or_default();
    let capabilities = context.capabilities.clone().unwrap_or_default();
    let (masked_paths, readonly_paths) =
        isolation::proc_paths(context.proc_mount.as_deref(), settings);
    Ok(SecurityContext {
        run_as_user: context.run_as_user.or(pod_context.run_as_user),
        run_as_group: context.run_as_group.or(pod_context.run_as_group),
        // As the kubelet's `determineEffectiveSecurityContext`: the fsGroup first.
        supplemental_groups: pod_context
            .fs_group
            .into_iter()
            .chain(pod_context.supplemental_groups.unwrap_or_default())
            .collect(),
        privileged: context.privileged.unwrap_or(false),
        readonly_rootfs: context.read_only_root_filesystem.unwrap_or(false),
        add_capabilities: capabilities.add.unwrap_or_default(),
        drop_capabilities: capabilities.drop.unwrap_or_default(),
        no_new_privs: context.allow_privilege_escalation == Some(false),
        seccomp: Some(isolation::seccomp_profile(
            pod,
            context.seccomp_profile.as_ref(),
            settings,
        )?),
        apparmor: isolation::apparmor_profile(
            pod,
            &container.name,
            context.app_armor_profile.as_ref(),
        )?,
        selinux: isolation::container_selinux(pod, container),
        masked_paths,
        readonly_paths,
    })
}

/// A mount for each `volumeMounts` entry with a source in `sources` (by the entry's index:
/// its volume, its subPath's bind or its image; `sub_path::mount_sources`); others are left
/// to the volume manager. The API-data volumes are read-only whatever the entry says, as the
/// kubelet's `mustMountRO`; so is an image volume (the image plugin's `ReadOnly`).
pub fn mounts(
    pod: &Pod,
    container: &Container,
    sources: &BTreeMap<usize, MountSource>,
) -> Vec<Mount> {
    let must_mount_read_only = api_data_volumes(pod);
    container
        .volume_mounts
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(index, mount)| {
            let container_path = PathBuf::from(&mount.mount_path);
            Some(match sources.get(&index)? {
                MountSource::Host(host_path) => Mount {
                    container_path,
                    host_path: host_path.clone(),
                    readonly: mount.read_only.unwrap_or(false)
                        || must_mount_read_only.contains(mount.name.as_str()),
                    ..Mount::default()
                },
                MountSource::Image(image) => Mount {
                    container_path,
                    readonly: true,
                    image: Some(image.clone()),
                    ..Mount::default()
                },
            })
        })
        .collect()
}

/// The pod's configMap, secret, downwardAPI and projected volumes: their mounters report
/// `ReadOnly` to the kubelet. Their directories are the atomic writer's; a container able to
/// write there could swap `..data` or a file for a link and steer the next update.
fn api_data_volumes(pod: &Pod) -> BTreeSet<&str> {
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter(|volume| {
            volume.config_map.is_some()
                || volume.secret.is_some()
                || volume.downward_api.is_some()
                || volume.projected.is_some()
        })
        .map(|volume| volume.name.as_str())
        .collect()
}

pub fn termination_message_path(container: &Container) -> String {
    container
        .termination_message_path
        .clone()
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_owned())
}

/// What the caller resolved for one container start.
pub struct Resolved<'a> {
    pub restart_count: u32,
    pub image_ref: &'a str,
    /// What each `volumeMounts` entry mounts, by its index (`sub_path::mount_sources`).
    pub mount_sources: &'a BTreeMap<usize, MountSource>,
    /// The host file mounted at `terminationMessagePath`, if made.
    pub termination_file: Option<&'a Path>,
    pub memory_capacity: u64,
    /// The environment `pods::env::container_env` built.
    pub env: &'a [(String, String)],
    pub isolation: &'a IsolationSettings,
}

/// CreateContainer's config for `container` of `pod`; an error for a profile the kubelet
/// could not name either.
pub fn container_config(
    pod: &Pod,
    container: &Container,
    resolved: &Resolved<'_>,
) -> Result<ContainerConfig, IsolationError> {
    let meta = &pod.metadata;
    let labels: Labels = [
        (POD_NAME_LABEL, meta.name.clone().unwrap_or_default()),
        (
            POD_NAMESPACE_LABEL,
            meta.namespace.clone().unwrap_or_default(),
        ),
        (POD_UID_LABEL, meta.uid.clone().unwrap_or_default()),
        (CONTAINER_NAME_LABEL, container.name.clone()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect();
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    let message_path = termination_message_path(container);
    let annotations: Labels = [
        (CONTAINER_HASH_ANNOTATION, container_hash(container)),
        (RESTART_COUNT_ANNOTATION, resolved.restart_count.to_string()),
        (TERMINATION_MESSAGE_PATH_ANNOTATION, message_path.clone()),
        (
            TERMINATION_MESSAGE_POLICY_ANNOTATION,
            container
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".to_owned()),
        ),
        (TERMINATION_GRACE_ANNOTATION, grace.to_string()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect();
    let mut mounts = mounts(pod, container, resolved.mount_sources);
    if let Some(file) = resolved.termination_file {
        mounts.push(Mount {
            container_path: PathBuf::from(message_path),
            host_path: file.to_owned(),
            ..Mount::default()
        });
    }
    let (command, args) = expand_command_and_args(container, resolved.env);
    Ok(ContainerConfig {
        name: container.name.clone(),
        attempt: resolved.restart_count,
        image: resolved.image_ref.to_owned(),
        user_specified_image: container.image.clone().unwrap_or_default(),
        command,
        args,
        working_dir: container.working_dir.clone().unwrap_or_default(),
        envs: resolved.env.to_vec(),
        mounts,
        labels,
        annotations,
        log_path: Path::new(&container.name).join(format!("{}.log", resolved.restart_count)),
        resources: Some(linux_resources(pod, container, resolved.memory_capacity)),
        security: security(pod, container, resolved.isolation)?,
        pid_target: None,
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodepulse_actors::ports::ImageMount;

    #[test]
    fn the_containers_groups_are_the_fs_group_then_the_supplemental_groups() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "securityContext": {"fsGroup": 1001, "supplementalGroups": [5, 6], "runAsUser": 1000},
                "containers": [{"name": "app"}],
            },
        }))
        .expect("a pod");
        let context = security(
            &pod,
            &pod.spec.as_ref().expect("spec").containers[0],
            &IsolationSettings::default(),
        )
        .expect("a context");
        assert_eq!(context.supplemental_groups, vec![1001, 5, 6]);
        assert_eq!(context.run_as_user, Some(1000));
    }

    #[test]
    fn api_data_volumes_are_mounted_read_only_even_when_the_mount_asks_for_writing() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "containers": [{"name": "app", "volumeMounts": [
                    {"name": "settings", "mountPath": "/settings", "readOnly": false},
                    {"name": "creds", "mountPath": "/creds"},
                    {"name": "info", "mountPath": "/info"},
                    {"name": "token", "mountPath": "/token"},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "frozen", "mountPath": "/frozen", "readOnly": true},
                ]}],
                "volumes": [
                    {"name": "settings", "configMap": {"name": "c"}},
                    {"name": "creds", "secret": {"secretName": "s"}},
                    {"name": "info", "downwardAPI": {"items": []}},
                    {"name": "token", "projected": {"sources": []}},
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "frozen", "emptyDir": {}},
                ],
            },
        }))
        .expect("a pod");
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let sources: BTreeMap<usize, MountSource> = container
            .volume_mounts
            .iter()
            .flatten()
            .enumerate()
            .map(|(index, m)| (index, MountSource::Host(PathBuf::from("/v").join(&m.name))))
            .collect();
        let read_only: BTreeMap<String, bool> = mounts(&pod, container, &sources)
            .into_iter()
            .map(|m| (m.container_path.display().to_string(), m.readonly))
            .collect();
        let expected: BTreeMap<String, bool> = [
            ("/settings", true),
            ("/creds", true),
            ("/info", true),
            ("/token", true),
            ("/scratch", false),
            ("/frozen", true),
        ]
        .into_iter()
        .map(|(path, ro)| (path.to_owned(), ro))
        .collect();
        assert_eq!(read_only, expected);
    }

    #[test]
    fn an_image_volume_is_mounted_from_its_image_read_only_whatever_the_entry_says() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "app", "volumeMounts": [
                    {"name": "kitten", "mountPath": "/volume", "readOnly": false},
                    {"name": "kitten", "mountPath": "/etc-of-it", "subPath": "etc"},
                    {"name": "scratch", "mountPath": "/scratch"},
                ]}],
                "volumes": [
                    {"name": "kitten", "image": {"reference": "r/kitten:1"}},
                    {"name": "scratch", "emptyDir": {}},
                ],
            },
        }))
        .expect("a pod");
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let image = |sub_path: &str| ImageMount {
            image: "sha256:cafe".to_owned(),
            user_specified_image: "r/kitten:1".to_owned(),
            sub_path: sub_path.to_owned(),
            ..ImageMount::default()
        };
        let sources = BTreeMap::from([
            (0, MountSource::Image(image(""))),
            (1, MountSource::Image(image("etc"))),
            (2, MountSource::Host("/v/scratch".into())),
        ]);
        assert_eq!(
            mounts(&pod, container, &sources),
            [
                Mount {
                    container_path: "/volume".into(),
                    readonly: true,
                    image: Some(image("")),
                    ..Mount::default()
                },
                Mount {
                    container_path: "/etc-of-it".into(),
                    readonly: true,
                    image: Some(image("etc")),
                    ..Mount::default()
                },
                Mount {
                    container_path: "/scratch".into(),
                    host_path: "/v/scratch".into(),
                    ..Mount::default()
                },
            ]
        );
    }
}
