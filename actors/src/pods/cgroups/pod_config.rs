//! What a pod's cgroup is given (`cm/helpers_linux.go` `ResourceConfigForPod`): CPU shares
//! from the pod's requests, a CFS quota and a memory limit from its limits (for Burstable pods
//! only when every container declares one, or the pod does), summed as component-helpers'
//! `PodRequests`/`PodLimits` (sidecars, init containers, pod-level resources, overhead).

use k8s_openapi::api::core::v1::Pod;

use super::{Qos, pod_qos};
use crate::{
    pods::pod_requests::{ResourceAmounts, aggregate_containers, amounts, pod_requests},
    ports::ResourceConfig,
    quantity::{QuantityError, value},
};

/// The kernel's bounds on `cpu.shares`, and the kubelet's CFS constants.
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;
pub const QUOTA_PERIOD: u64 = 100_000;
pub const MIN_QUOTA_PERIOD: i64 = 1_000;

/// The kubelet settings the pod cgroup depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCgroupSettings {
    /// `cpuCFSQuota`: CPU limits enforced (off: quota -1).
    pub enforce_cpu_limits: bool,
    /// `cpuCFSQuotaPeriod` in µs.
    pub cpu_period: u64,
    /// `podPidsLimit`: the pod's `pids.max` when above 0.
    pub pod_pids_limit: i64,
}

impl Default for PodCgroupSettings {
    fn default() -> Self {
        Self {
            enforce_cpu_limits: true,
            cpu_period: QUOTA_PERIOD,
            pod_pids_limit: -1,
        }
    }
}

/// `MilliCPUToShares`: 0 → 2, else `m×1024/1000` within the kernel's bounds.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = u64::try_from(milli_cpu.saturating_mul(1024) / 1000).unwrap_or(MAX_SHARES);
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// `MilliCPUToQuota`: 0 → 0 (no quota), else `m×period/1000` µs, at least 1 ms.
pub fn milli_cpu_to_quota(milli_cpu: i64, period: u64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let period = i64::try_from(period).unwrap_or(i64::MAX);
    (milli_cpu.saturating_mul(period) / 1000).max(MIN_QUOTA_PERIOD)
}

/// `HugePageLimits`: `hugepages-<size>` amounts by page size in bytes.
pub fn hugepage_limits(list: &ResourceAmounts) -> std::collections::BTreeMap<u64, i64> {
    let mut limits = std::collections::BTreeMap::new();
    for (name, amount) in list {
        let Some(size) = name.strip_prefix("hugepages-") else {
            continue;
        };
        if let Some(size) = value(size).ok().and_then(|s| u64::try_from(s).ok()) {
            *limits.entry(size).or_insert(0) += amount;
        }
    }
    limits
}

/// The pod's cgroup config.
pub fn resource_config_for_pod(
    pod: &Pod,
    settings: PodCgroupSettings,
) -> Result<ResourceConfig, QuantityError> {
    let requests = pod_requests(pod)?;
    let limits = pod_limits(pod)?;
    let cpu_request = requests.get("cpu").copied().unwrap_or(0);
    let cpu_limit = limits.amounts.get("cpu").copied().unwrap_or(0);
    let memory_limit = limits.amounts.get("memory").copied().unwrap_or(0);
    let shares = milli_cpu_to_shares(cpu_request);
    let quota = if settings.enforce_cpu_limits {
        milli_cpu_to_quota(cpu_limit, settings.cpu_period)
    } else {
        -1
    };
    let mut config = ResourceConfig {
        hugepage_limits: hugepage_limits(&requests),
        pids_limit: (settings.pod_pids_limit > 0).then_some(settings.pod_pids_limit),
        ..ResourceConfig::default()
    };
    match pod_qos(pod) {
        Qos::Guaranteed => {
            config.cpu_shares = Some(shares);
            config.cpu_quota = Some(quota);
            config.cpu_period = Some(settings.cpu_period);
            config.memory = Some(memory_limit);
        }
        Qos::Burstable => {
            config.cpu_shares = Some(shares);
            if limits.cpu_declared {
                config.cpu_quota = Some(quota);
                config.cpu_period = Some(settings.cpu_period);
            }
            if limits.memory_declared {
                config.memory = Some(memory_limit);
            }
        }
        Qos::BestEffort => config.cpu_shares = Some(MIN_SHARES),
    }
    Ok(config)
}

/// `PodLimits`, and whether every container (as `ContainerFn` sees them) declared a CPU and a
/// memory limit, or the pod did.
struct PodLimits {
    amounts: ResourceAmounts,
    cpu_declared: bool,
    memory_declared: bool,
}

fn pod_limits(pod: &Pod) -> Result<PodLimits, QuantityError> {
    let mut limits = PodLimits {
        amounts: ResourceAmounts::new(),
        cpu_declared: true,
        memory_declared: true,
    };
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(limits);
    };
    let (mut cpu_declared, mut memory_declared) = (true, true);
    limits.amounts = aggregate_containers(spec, true, |list| {
        cpu_declared &= list.get("cpu").copied().unwrap_or(0) != 0;
        memory_declared &= list.get("memory").copied().unwrap_or(0) != 0;
    })?;
    limits.cpu_declared = cpu_declared;
    limits.memory_declared = memory_declared;
    if let Some(pod_level) = spec.resources.as_ref() {
        let own = amounts(pod_level.limits.as_ref())?;
        for (name, amount) in &own {
            if name == "cpu" || name == "memory" || name.starts_with("hugepages-") {
                limits.amounts.insert(name.clone(), *amount);
            }
        }
        limits.cpu_declared |= own.get("cpu").copied().unwrap_or(0) != 0;
        limits.memory_declared |= own.get("memory").copied().unwrap_or(0) != 0;
    }
    // The overhead goes on the limits that are set (non-zero) only.
    for (name, amount) in amounts(spec.overhead.as_ref())? {
        if let Some(limit) = limits.amounts.get_mut(&name).filter(|limit| **limit != 0) {
            *limit = limit.saturating_add(amount);
        }
    }
    Ok(limits)
}

#[cfg(test)]
#[path = "pod_config_tests.rs"]
mod tests;
