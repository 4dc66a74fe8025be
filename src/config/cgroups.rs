//! The cgroup settings as the kubelet reads them (`cgroupsPerQOS`, `cgroupRoot`,
//! `cgroupDriver`, `enforceNodeAllocatable`, the reserved cgroups, `podPidsLimit`,
//! `failCgroupV1`): their defaults and the kubelet's validation rules and messages
//! (`pkg/kubelet/apis/config/validation`). The node's wiring reads them here too.

pub use nodepulse_actors::ports::CgroupDriver;

use super::{Config, validate::InvalidSetting};

/// `enforceNodeAllocatable` keys (`kl/types/constants.go`).
pub const ENFORCE_PODS: &str = "pods";
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
pub const ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE: &str = "system-reserved-compressible";
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
pub const ENFORCE_KUBE_RESERVED_COMPRESSIBLE: &str = "kube-reserved-compressible";
pub const ENFORCE_NONE: &str = "none";

/// The kubelet's refusal on a cgroup v1 host when `failCgroupV1` is set.
pub const CGROUP_V1_REFUSED: &str = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release";

pub fn default_enforce_node_allocatable() -> Vec<String> {
    vec![ENFORCE_PODS.to_owned()]
}

pub fn default_pod_pids_limit() -> i64 {
    -1
}

impl Config {
    /// `cgroupRoot`, or `/` as the kubelet defaults it when `cgroupsPerQOS` is on.
    pub fn effective_cgroup_root(&self) -> &str {
        match self.cgroup_root.as_deref() {
            Some(root) if !root.is_empty() => root,
            _ => "/",
        }
    }

    /// Whether `key` is listed in `enforceNodeAllocatable`.
    pub fn enforces(&self, key: &str) -> bool {
        self.enforce_node_allocatable.iter().any(|k| k == key)
    }
}

fn refusal(field: &str, value: impl std::fmt::Display, reason: String) -> InvalidSetting {
    InvalidSetting {
        field: field.to_owned(),
        value: value.to_string(),
        reason,
    }
}

/// The kubelet's checks of `enforceNodeAllocatable` and the cgroups it names, in its order.
pub(super) fn validate_cgroups(config: &Config) -> Vec<InvalidSetting> {
    const FIELD: &str = "enforceNodeAllocatable";
    let keys = &config.enforce_node_allocatable;
    let listed = keys.join(",");
    let mut problems = Vec::new();
    let has = |key: &str| keys.iter().any(|k| k == key);
    for (key, compressible) in [
        (
            ENFORCE_SYSTEM_RESERVED,
            ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
        ),
        (ENFORCE_KUBE_RESERVED, ENFORCE_KUBE_RESERVED_COMPRESSIBLE),
    ] {
        if has(key) && has(compressible) {
            problems.push(refusal(FIELD, &listed, format!("invalid configuration: both {key:?} and {compressible:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)")));
        }
    }
    let unset = |cgroup: &Option<String>| cgroup.as_deref().is_none_or(str::is_empty);
    let mut seen = Vec::new();
    for key in keys {
        if seen.contains(&key) {
            problems.push(refusal(FIELD, &listed, format!("invalid configuration: duplicated enforcements {key:?} in enforceNodeAllocatable (--enforce-node-allocatable)")));
            continue;
        }
        seen.push(key);
        match key.as_str() {
            ENFORCE_PODS => {}
            ENFORCE_SYSTEM_RESERVED | ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE => {
                if unset(&config.system_reserved_cgroup) {
                    problems.push(refusal("systemReservedCgroup", "", format!("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when {ENFORCE_SYSTEM_RESERVED:?} or {ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE:?} included in enforceNodeAllocatable (--enforce-node-allocatable)")));
                }
            }
            ENFORCE_KUBE_RESERVED | ENFORCE_KUBE_RESERVED_COMPRESSIBLE => {
                if unset(&config.kube_reserved_cgroup) {
                    problems.push(refusal("kubeReservedCgroup", "", format!("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when {ENFORCE_KUBE_RESERVED:?} or {ENFORCE_KUBE_RESERVED_COMPRESSIBLE:?} included in enforceNodeAllocatable (--enforce-node-allocatable)")));
                }
            }
            ENFORCE_NONE => {
                if keys.len() > 1 {
                    problems.push(refusal(FIELD, &listed, format!("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when {ENFORCE_NONE:?} is specified")));
                }
                continue;
            }
            other => {
                problems.push(refusal(FIELD, &listed, format!("invalid configuration: option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are {ENFORCE_PODS:?}, {ENFORCE_SYSTEM_RESERVED:?}, {ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE:?}, {ENFORCE_KUBE_RESERVED:?}, {ENFORCE_KUBE_RESERVED_COMPRESSIBLE:?} or {ENFORCE_NONE:?}")));
                continue;
            }
        }
        if !config.cgroups_per_qos {
            problems.push(refusal("cgroupsPerQOS", "false", format!("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when {key:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)")));
        }
    }
    for (field, cgroup) in [
        ("cgroupRoot", &config.cgroup_root),
        ("systemReservedCgroup", &config.system_reserved_cgroup),
        ("kubeReservedCgroup", &config.kube_reserved_cgroup),
    ] {
        if let Some(path) = cgroup.as_deref().filter(|p| !p.is_empty())
            && (!path.starts_with('/') || path.split('/').any(|part| part == ".."))
        {
            problems.push(refusal(
                field,
                path,
                "must be an absolute cgroup path without \"..\"".to_owned(),
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigError, Source};

    fn refusals(yaml: &str) -> Vec<String> {
        match Config::parse(yaml, Source::Embedded) {
            Ok(_) => Vec::new(),
            Err(ConfigError::Invalid { settings, .. }) => {
                settings.iter().map(ToString::to_string).collect()
            }
            Err(other) => panic!("not a validation error: {other}"),
        }
    }

    #[test]
    fn the_defaults_are_the_kubelets_but_failing_on_cgroup_v1() {
        let config = Config::parse("{}", Source::Embedded).expect("defaults");
        assert!(config.cgroups_per_qos);
        assert_eq!(config.effective_cgroup_root(), "/");
        assert_eq!(config.cgroup_driver, CgroupDriver::Cgroupfs);
        assert_eq!(config.enforce_node_allocatable, ["pods"]);
        assert_eq!(config.pod_pids_limit, -1);
        assert!(!config.fail_cgroup_v1);
    }

    #[test]
    fn enforcing_a_reservation_needs_its_cgroup_and_qos_cgroups() {
        let problems = refusals(
            "enforceNodeAllocatable: [pods, system-reserved, kube-reserved-compressible]\ncgroupsPerQOS: false\n",
        );
        assert!(problems.iter().any(|p| p.contains("systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" or \"system-reserved-compressible\"")), "{problems:?}");
        assert!(
            problems.iter().any(
                |p| p.contains("kubeReservedCgroup (--kube-reserved-cgroup) must be specified")
            ),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains(
                "cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained"
            )),
            "{problems:?}"
        );
        assert!(
            refusals(
                "enforceNodeAllocatable: [pods, kube-reserved]\nkubeReservedCgroup: /kube.slice\n"
            )
            .is_empty()
        );
    }

    #[test]
    fn none_stands_alone_and_keys_are_known_unique_and_not_paired_with_their_compressible_form() {
        let none = refusals("enforceNodeAllocatable: [none, pods]\n");
        assert!(
            none.iter()
                .any(|p| p.contains("may not contain additional enforcements when \"none\"")),
            "{none:?}"
        );
        let unknown = refusals("enforceNodeAllocatable: [pod]\n");
        assert!(unknown.iter().any(|p| p.contains("option \"pod\" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\"")), "{unknown:?}");
        let twice = refusals("enforceNodeAllocatable: [pods, pods]\n");
        assert!(
            twice
                .iter()
                .any(|p| p.contains("duplicated enforcements \"pods\"")),
            "{twice:?}"
        );
        let both = refusals(
            "enforceNodeAllocatable: [system-reserved, system-reserved-compressible]\nsystemReservedCgroup: /system.slice\n",
        );
        assert!(both.iter().any(|p| p.contains("both \"system-reserved\" and \"system-reserved-compressible\" cannot be specified together")), "{both:?}");
        assert!(refusals("enforceNodeAllocatable: [none]\ncgroupsPerQOS: false\n").is_empty());
        assert!(refusals("enforceNodeAllocatable: []\ncgroupsPerQOS: false\n").is_empty());
    }

    #[test]
    fn cgroup_paths_are_absolute_and_the_driver_is_cgroupfs_or_systemd() {
        let relative = refusals("cgroupRoot: kubelet\n");
        assert!(
            relative
                .iter()
                .any(|p| p.starts_with("cgroupRoot: invalid value \"kubelet\"")),
            "{relative:?}"
        );
        let config = Config::parse("cgroupDriver: systemd\ncgroupRoot: /np\n", Source::Embedded)
            .expect("systemd");
        assert_eq!(config.cgroup_driver, CgroupDriver::Systemd);
        assert_eq!(config.effective_cgroup_root(), "/np");
        assert!(Config::parse("cgroupDriver: docker\n", Source::Embedded).is_err());
    }
}
