//! The values of the cgroups above the pods: `burstable` and `besteffort`
//! (`qos_container_manager_linux.go` `UpdateCgroups`: Burstable gets the shares of its pods'
//! CPU requests, BestEffort the minimum), `kubepods` at node allocatable and the reserved
//! cgroups (`node_container_manager_linux.go`), with the kubelet's checks and messages.

use k8s_openapi::api::core::v1::Pod;

use super::{
    Qos,
    pod_config::{MIN_SHARES, hugepage_limits, milli_cpu_to_shares},
    pod_qos,
};
use crate::{
    pods::pod_requests::{ResourceAmounts, pod_requests},
    ports::ResourceConfig,
};

/// What `burstable` and `besteffort` are given for the active `pods`.
pub fn qos_cgroup_configs<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
) -> [(Qos, ResourceConfig); 2] {
    let mut burstable_milli_cpu: i64 = 0;
    for pod in pods {
        if pod_qos(pod) != Qos::Burstable {
            continue;
        }
        // A pod whose quantities do not parse was refused at admission.
        if let Some(cpu) = pod_requests(pod).ok().and_then(|r| r.get("cpu").copied()) {
            burstable_milli_cpu = burstable_milli_cpu.saturating_add(cpu);
        }
    }
    let shares = |shares| ResourceConfig {
        cpu_shares: Some(shares),
        ..ResourceConfig::default()
    };
    [
        (
            Qos::Burstable,
            shares(milli_cpu_to_shares(burstable_milli_cpu)),
        ),
        (Qos::BestEffort, shares(MIN_SHARES)),
    ]
}

/// `getCgroupConfig`: memory, CPU shares, PIDs and hugepages of `list` (CPU only when
/// `compressible_only`); `None` for an empty list (the kubelet's "not configured properly").
pub fn cgroup_config(list: &ResourceAmounts, compressible_only: bool) -> Option<ResourceConfig> {
    if list.is_empty() {
        return None;
    }
    let mut config = ResourceConfig::default();
    if let Some(cpu) = list.get("cpu") {
        config.cpu_shares = Some(milli_cpu_to_shares(*cpu));
    }
    if !compressible_only {
        config.memory = list.get("memory").copied();
        config.pids_limit = list.get("pid").copied();
        config.hugepage_limits = hugepage_limits(list);
    }
    Some(config)
}

/// What `kubepods` is capped at: capacity minus `systemReserved` and `kubeReserved` (floored
/// at 0) when `pods` is enforced, else the capacity. The eviction threshold is not taken off
/// here, only from the Node's `allocatable`.
pub fn node_allocatable(
    capacity: &ResourceAmounts,
    reserved: &[&ResourceAmounts],
    enforce_pods: bool,
) -> ResourceAmounts {
    let mut allocatable = capacity.clone();
    if enforce_pods {
        for (name, amount) in &mut allocatable {
            let held: i64 = reserved
                .iter()
                .filter_map(|list| list.get(name))
                .copied()
                .sum();
            *amount = (*amount - held).max(0);
        }
    }
    allocatable
}

/// The kubelet's refusal of a reservation larger than the capacity (`validateNodeAllocatable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Node Allocatable configuration. {0}")]
pub struct ReservationTooLarge(pub String);

pub fn validate_node_allocatable(
    capacity: &ResourceAmounts,
    reserved: &[&ResourceAmounts],
) -> Result<(), ReservationTooLarge> {
    let mut problems = Vec::new();
    for (name, amount) in capacity {
        let held: i64 = reserved
            .iter()
            .filter_map(|list| list.get(name))
            .copied()
            .sum();
        if held > *amount {
            problems.push(format!("Resource {name:?} has a reservation of {held} but capacity of {amount}. Expected capacity >= reservation."));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ReservationTooLarge(problems.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn amounts(list: &[(&str, i64)]) -> ResourceAmounts {
        list.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn burstable_gets_the_shares_of_its_pods_cpu_requests_and_besteffort_the_minimum() {
        let pod = |resources: serde_json::Value| -> Pod {
            serde_json::from_value(
                json!({"spec": {"containers": [{"name": "a", "resources": resources}]}}),
            )
            .unwrap()
        };
        let pods = [
            pod(json!({"requests": {"cpu": "100m"}})),
            pod(json!({"requests": {"cpu": "400m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}})),
            pod(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
            ),
            pod(json!({})),
        ];
        let [(burstable, b), (besteffort, e)] = qos_cgroup_configs(&pods);
        assert_eq!((burstable, b.cpu_shares), (Qos::Burstable, Some(512)));
        assert_eq!((besteffort, e.cpu_shares), (Qos::BestEffort, Some(2)));
        let [(_, none), _] = qos_cgroup_configs(&[]);
        assert_eq!(none.cpu_shares, Some(2));
    }

    #[test]
    fn kubepods_is_capacity_minus_reservations_when_pods_are_enforced() {
        let capacity = amounts(&[("cpu", 2000), ("memory", 8 << 30), ("pid", 4_194_304)]);
        let system = amounts(&[("cpu", 500), ("memory", 1 << 30)]);
        let kube = amounts(&[("memory", 1 << 30), ("pid", 1000)]);
        let allocatable = node_allocatable(&capacity, &[&system, &kube], true);
        assert_eq!(
            allocatable,
            amounts(&[("cpu", 1500), ("memory", 6 << 30), ("pid", 4_193_304)])
        );
        assert_eq!(
            node_allocatable(&capacity, &[&system, &kube], false),
            capacity
        );
        let config = cgroup_config(&allocatable, false).unwrap();
        assert_eq!(
            (config.cpu_shares, config.memory, config.pids_limit),
            (Some(1536), Some(6 << 30), Some(4_193_304))
        );
        let compressible = cgroup_config(&system, true).unwrap();
        assert_eq!(
            (compressible.cpu_shares, compressible.memory),
            (Some(512), None)
        );
        assert_eq!(cgroup_config(&ResourceAmounts::new(), false), None);
    }

    #[test]
    fn a_reservation_above_capacity_is_refused_with_the_kubelets_message() {
        let capacity = amounts(&[("memory", 1 << 30)]);
        let reserved = amounts(&[("memory", 2 << 30)]);
        let error = validate_node_allocatable(&capacity, &[&reserved]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid Node Allocatable configuration. Resource \"memory\" has a reservation of 2147483648 but capacity of 1073741824. Expected capacity >= reservation."
        );
    }
}
