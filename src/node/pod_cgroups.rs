//! The node's cgroups at the CRI provider's start, as the kubelet's container manager sets
//! them up: the cgroup root checked, `kubepods` made and capped at node allocatable (capacity
//! minus the reservations when `pods` is enforced), the QoS cgroups made, and the reserved
//! cgroups capped when their enforcement is listed, with the kubelet's messages. A failure
//! fails the start, which the starting provider shows in Ready and tries again.

use std::{path::Path, sync::Arc};

use nodepulse_actors::{
    pods::{
        cgroups::{
            CgroupLayout, Qos,
            pod_config::{MIN_SHARES, PodCgroupSettings, QUOTA_PERIOD},
            qos::{cgroup_config, node_allocatable, validate_node_allocatable},
        },
        pod_requests::{ResourceAmounts, amounts},
    },
    ports::{CgroupDriver, CgroupName, MachineInfo, PodCgroups, PodCgroupsError, ResourceConfig},
};
use nodepulse_cri::provider::PodCgroupsSetup;

use crate::{
    config::{
        CGROUP_V1_REFUSED, Config, ENFORCE_KUBE_RESERVED, ENFORCE_KUBE_RESERVED_COMPRESSIBLE,
        ENFORCE_PODS, ENFORCE_SYSTEM_RESERVED, ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
    },
    host::{cgroup::HostCgroups, pids::node_pids},
};

/// Why the node's cgroups could not be set up. Retrying helps only when the host changes
/// (a reserved cgroup made, memory freed below a new limit).
#[derive(Debug, thiserror::Error)]
pub enum NodeCgroupsError {
    #[error("{CGROUP_V1_REFUSED}")]
    CgroupV1,
    /// nodepulse writes cgroup files itself; systemd's slices need its D-Bus API.
    #[error(
        "cgroupDriver \"systemd\" is not supported: nodepulse writes cgroups through the cgroup filesystem and does not talk to systemd over D-Bus, which the kubelet's systemd cgroup manager needs to create slices (libcontainer has no fallback without it); use cgroupDriver: cgroupfs"
    )]
    SystemdDriver,
    #[error("invalid configuration: cgroup {name:?} has some missing paths: {paths}")]
    MissingRoot { name: String, paths: String },
    #[error("{0}")]
    Allocatable(String),
    #[error("Failed to update Node Allocatable Limits {cgroup:?}: {source}")]
    NodeAllocatable {
        cgroup: String,
        #[source]
        source: PodCgroupsError,
    },
    #[error("failed to create the QoS cgroup {cgroup:?}: {source}")]
    Qos {
        cgroup: String,
        #[source]
        source: PodCgroupsError,
    },
    #[error("Failed to enforce {which} Cgroup Limits on {cgroup:?}: {reason}")]
    Reserved {
        which: &'static str,
        cgroup: String,
        reason: String,
    },
    #[error("cannot read the host's cgroups: {0}")]
    Host(#[source] PodCgroupsError),
}

/// The node's capacity as the kubelet's container manager counts it: CPU in millicores,
/// memory in bytes, PIDs.
fn capacity(machine: &MachineInfo, host_root: &Path) -> ResourceAmounts {
    let mut capacity = ResourceAmounts::new();
    capacity.insert("cpu".to_owned(), i64::from(machine.cpu_cores) * 1000);
    capacity.insert(
        "memory".to_owned(),
        i64::try_from(machine.memory_bytes).unwrap_or(i64::MAX),
    );
    if let Ok(pids) = node_pids(host_root) {
        capacity.insert(
            "pid".to_owned(),
            i64::try_from(pids.max_tasks).unwrap_or(i64::MAX),
        );
    }
    capacity
}

fn reservation(
    list: &std::collections::BTreeMap<String, String>,
) -> Result<ResourceAmounts, NodeCgroupsError> {
    let quantities = list
        .iter()
        .map(|(name, text)| {
            (
                name.clone(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.clone()),
            )
        })
        .collect();
    amounts(Some(&quantities))
        .map_err(|e| NodeCgroupsError::Allocatable(format!("invalid reservation: {e}")))
}

/// Sets the node's cgroups up; `None` when `cgroupsPerQOS` is off (pods get the runtime's
/// default parent).
pub fn node_cgroups(
    config: &Config,
    machine: &MachineInfo,
) -> Result<Option<PodCgroupsSetup>, NodeCgroupsError> {
    if !config.cgroups_per_qos {
        return Ok(None);
    }
    if config.cgroup_driver == CgroupDriver::Systemd {
        return Err(NodeCgroupsError::SystemdDriver);
    }
    let host = HostCgroups::discover(&config.host_root, config.cgroup_driver)
        .map_err(NodeCgroupsError::Host)?;
    if config.fail_cgroup_v1 && !host.is_v2() {
        return Err(NodeCgroupsError::CgroupV1);
    }
    let layout = CgroupLayout::new(config.effective_cgroup_root(), config.cgroup_driver);
    let missing = host.missing_paths(&layout.root);
    if !missing.is_empty() {
        return Err(NodeCgroupsError::MissingRoot {
            name: format!("{:?}", layout.root.components()),
            paths: missing
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let capacity = capacity(machine, &config.host_root);
    let system = reservation(&config.system_reserved)?;
    let kube = reservation(&config.kube_reserved)?;
    validate_node_allocatable(&capacity, &[&system, &kube])
        .map_err(|e| NodeCgroupsError::Allocatable(e.to_string()))?;
    let allocatable = node_allocatable(&capacity, &[&system, &kube], config.enforces(ENFORCE_PODS));
    let kubepods = layout.kubepods();
    let limits = cgroup_config(&allocatable, false).unwrap_or_default();
    host.ensure(&kubepods, &limits)
        .map_err(|source| NodeCgroupsError::NodeAllocatable {
            cgroup: layout.literal(&kubepods),
            source,
        })?;
    tracing::info!(cgroup = %layout.literal(&kubepods), ?limits, "Updated Node Allocatable limit across pods");
    for (qos, shares) in [(Qos::Burstable, None), (Qos::BestEffort, Some(MIN_SHARES))] {
        let name = layout.qos(qos);
        let config = ResourceConfig {
            cpu_shares: shares,
            ..ResourceConfig::default()
        };
        host.ensure(&name, &config)
            .map_err(|source| NodeCgroupsError::Qos {
                cgroup: layout.literal(&name),
                source,
            })?;
    }
    enforce_reserved(config, &host, &system, &kube)?;
    Ok(Some(PodCgroupsSetup {
        cgroups: Arc::new(host),
        layout,
        settings: PodCgroupSettings {
            enforce_cpu_limits: true,
            cpu_period: QUOTA_PERIOD,
            pod_pids_limit: config.pod_pids_limit,
        },
    }))
}

/// `system-reserved` and `kube-reserved` (and their compressible forms): the existing cgroup
/// capped at the reservation.
fn enforce_reserved(
    config: &Config,
    host: &HostCgroups,
    system: &ResourceAmounts,
    kube: &ResourceAmounts,
) -> Result<(), NodeCgroupsError> {
    let enforcements = [
        (
            ENFORCE_SYSTEM_RESERVED,
            "System Reserved",
            &config.system_reserved_cgroup,
            system,
            false,
        ),
        (
            ENFORCE_KUBE_RESERVED,
            "Kube Reserved",
            &config.kube_reserved_cgroup,
            kube,
            false,
        ),
        (
            ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
            "System Reserved Compressible",
            &config.system_reserved_cgroup,
            system,
            true,
        ),
        (
            ENFORCE_KUBE_RESERVED_COMPRESSIBLE,
            "Kube Reserved Compressible",
            &config.kube_reserved_cgroup,
            kube,
            true,
        ),
    ];
    for (key, which, cgroup, reserved, compressible) in enforcements {
        if !config.enforces(key) {
            continue;
        }
        let cgroup = cgroup.clone().unwrap_or_default();
        let name = CgroupName::parse(&cgroup, config.cgroup_driver);
        let failed = |reason: String| NodeCgroupsError::Reserved {
            which,
            cgroup: cgroup.clone(),
            reason,
        };
        let Some(limits) = cgroup_config(reserved, compressible) else {
            return Err(failed(format!(
                "{:?} cgroup is not configured properly",
                name.components()
            )));
        };
        let missing = host.missing_paths(&name);
        if !missing.is_empty() {
            let paths: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
            return Err(failed(format!(
                "cgroup {:?} has some missing paths: {}",
                name.components(),
                paths.join(", ")
            )));
        }
        host.update(&name, &limits)
            .map_err(|e| failed(e.to_string()))?;
        tracing::info!(
            cgroup,
            "Updated limits on {} cgroup {cgroup}",
            which.to_lowercase()
        );
    }
    Ok(())
}
