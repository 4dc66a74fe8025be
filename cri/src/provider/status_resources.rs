//! A container status's `resources` and `allocatedResources` as the kubelet 1.36's
//! `convertContainerStatusResources` fills them: the allocated requests and limits, with CPU
//! and the memory limit replaced by what the runtime reports it applied to a running container
//! (CRI `ContainerStatus.resources`, shares and quota turned back into millicores). Pure.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, ResourceRequirements},
    apimachinery::pkg::api::resource::Quantity,
};

use nodepulse_actors::{
    ports::{ContainerState, ContainerStatus, LinuxResources},
    quantity::{format_binary, format_cpu, milli_value},
};

/// The kubelet's `cm.MinShares`: shares at or below it read back as no request.
const MIN_SHARES: i64 = 2;
/// The kubelet's `cm.MinMilliCPULimit` (the smallest quota, 1 ms of a 100 ms period).
const MIN_MILLI_CPU_LIMIT: i64 = 10;
const SHARES_PER_CPU: i64 = 1024;

/// The kubelet's `SharesToMilliCPU`: 0 below the minimum shares, else rounded up.
pub fn shares_to_milli_cpu(shares: i64) -> i64 {
    if shares < MIN_SHARES {
        return 0;
    }
    (shares * 1000 + SHARES_PER_CPU - 1) / SHARES_PER_CPU
}

/// The kubelet's `QuotaToMilliCPU`: no quota (-1) is no limit.
pub fn quota_to_milli_cpu(quota: i64, period: i64) -> i64 {
    if quota == -1 || period == 0 {
        return 0;
    }
    quota * 1000 / period
}

/// What the runtime reports, as the kubelet's `toKubeContainerResources` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Applied {
    cpu_limit_milli: Option<i64>,
    cpu_request_milli: Option<i64>,
    memory_limit: Option<i64>,
}

impl Applied {
    fn of(linux: &LinuxResources) -> Self {
        let positive = |value: i64| (value > 0).then_some(value);
        Self {
            cpu_limit_milli: (linux.cpu_period > 0)
                .then(|| quota_to_milli_cpu(linux.cpu_quota, linux.cpu_period))
                .and_then(positive),
            cpu_request_milli: positive(linux.cpu_shares)
                .map(shares_to_milli_cpu)
                .and_then(positive),
            memory_limit: positive(linux.memory_limit_in_bytes),
        }
    }
}

fn cpu(milli: i64) -> Quantity {
    Quantity(format_cpu(u64::try_from(milli).unwrap_or(0)))
}

fn milli_of(list: &BTreeMap<String, Quantity>, name: &str) -> i64 {
    list.get(name)
        .and_then(|q| milli_value(&q.0).ok())
        .unwrap_or(0)
}

/// `status.resources` of a container whose newest instance is `newest`, allocated `allocated`.
/// A container not running shows its allocation; a running one what the runtime applied where
/// it says (a runtime that reports nothing: the allocation, which is what was applied).
pub fn status_resources(allocated: &Container, newest: &ContainerStatus) -> ResourceRequirements {
    let mut resources = allocated.resources.clone().unwrap_or_default();
    if newest.state != ContainerState::Running {
        return resources;
    }
    let Some(applied) = newest.resources.as_ref().map(Applied::of) else {
        return resources;
    };
    if let Some(limits) = resources.limits.as_mut() {
        if let Some(milli) = applied.cpu_limit_milli {
            // Both at or below the smallest quota: the allocation, to avoid a confusing 10m.
            if milli > MIN_MILLI_CPU_LIMIT || milli_of(limits, "cpu") > MIN_MILLI_CPU_LIMIT {
                limits.insert("cpu".to_owned(), cpu(milli));
            }
        }
        if let Some(bytes) = applied.memory_limit {
            limits.insert(
                "memory".to_owned(),
                Quantity(format_binary(u64::try_from(bytes).unwrap_or(0))),
            );
        }
    }
    if let (Some(requests), Some(milli)) = (resources.requests.as_mut(), applied.cpu_request_milli)
        // The kubelet compares millicores with MinShares here; kept as it does.
        && (milli > MIN_SHARES || milli_of(requests, "cpu") > MIN_SHARES)
    {
        requests.insert("cpu".to_owned(), cpu(milli));
    }
    resources
}

/// `status.allocatedResources`: the allocated requests.
pub fn allocated_resources(allocated: &Container) -> Option<BTreeMap<String, Quantity>> {
    allocated.resources.as_ref()?.requests.clone()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use nodepulse_actors::ports::Labels;

    fn container(resources: serde_json::Value) -> Container {
        serde_json::from_value(json!({"name": "c", "resources": resources})).unwrap()
    }

    fn instance(state: ContainerState, applied: Option<LinuxResources>) -> ContainerStatus {
        ContainerStatus {
            id: "id".into(),
            name: "c".into(),
            attempt: 0,
            state,
            created_at: 1,
            started_at: 1,
            finished_at: 0,
            exit_code: 0,
            image: String::new(),
            image_ref: String::new(),
            reason: String::new(),
            message: String::new(),
            labels: Labels::new(),
            annotations: Labels::new(),
            log_path: "x".into(),
            mounts: Vec::new(),
            resources: applied,
        }
    }

    fn linux(shares: i64, quota: i64, memory: i64) -> LinuxResources {
        LinuxResources {
            cpu_period: 100_000,
            cpu_quota: quota,
            cpu_shares: shares,
            memory_limit_in_bytes: memory,
            oom_score_adj: 0,
        }
    }

    fn text(list: Option<&BTreeMap<String, Quantity>>, name: &str) -> Option<String> {
        list?.get(name).map(|q| q.0.clone())
    }

    #[test]
    fn shares_and_quota_read_back_as_the_kubelet_reads_them() {
        assert_eq!(shares_to_milli_cpu(1), 0);
        assert_eq!(shares_to_milli_cpu(2), 2);
        assert_eq!(shares_to_milli_cpu(102), 100);
        assert_eq!(shares_to_milli_cpu(512), 500);
        assert_eq!(quota_to_milli_cpu(-1, 100_000), 0);
        assert_eq!(quota_to_milli_cpu(50_000, 100_000), 500);
        assert_eq!(quota_to_milli_cpu(1_000, 100_000), 10);
    }

    #[test]
    fn a_running_container_shows_what_the_runtime_applied_not_the_spec() {
        let allocated = container(json!({
            "requests": {"cpu": "200m", "memory": "100Mi"},
            "limits": {"cpu": "400m", "memory": "200Mi"},
        }));
        // The runtime still holds the sizes from before a resize.
        let newest = instance(ContainerState::Running, Some(linux(102, 20_000, 150 << 20)));
        let got = status_resources(&allocated, &newest);
        assert_eq!(text(got.requests.as_ref(), "cpu").as_deref(), Some("100m"));
        assert_eq!(text(got.limits.as_ref(), "cpu").as_deref(), Some("200m"));
        assert_eq!(
            text(got.limits.as_ref(), "memory").as_deref(),
            Some("150Mi")
        );
        // The runtime knows no memory request: the allocation's.
        assert_eq!(
            text(got.requests.as_ref(), "memory").as_deref(),
            Some("100Mi")
        );
        assert_eq!(
            text(allocated_resources(&allocated).as_ref(), "cpu").as_deref(),
            Some("200m")
        );
    }

    #[test]
    fn an_exited_container_or_a_silent_runtime_shows_the_allocation() {
        let allocated = container(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}));
        for newest in [
            instance(ContainerState::Exited, Some(linux(102, 10_000, 0))),
            instance(ContainerState::Running, None),
        ] {
            let got = status_resources(&allocated, &newest);
            assert_eq!(got, allocated.resources.clone().unwrap());
        }
    }

    #[test]
    fn limits_and_requests_absent_from_the_spec_stay_absent() {
        // BestEffort: the runtime's minimum shares do not invent a request.
        let best_effort = container(json!({}));
        let got = status_resources(
            &best_effort,
            &instance(ContainerState::Running, Some(linux(2, 0, 0))),
        );
        assert_eq!(got, ResourceRequirements::default());
        assert_eq!(allocated_resources(&best_effort), None);
    }

    #[test]
    fn values_at_the_minimum_on_both_sides_keep_the_allocation() {
        let allocated = container(json!({"requests": {"cpu": "1m"}, "limits": {"cpu": "5m"}}));
        let got = status_resources(
            &allocated,
            &instance(ContainerState::Running, Some(linux(2, 1_000, 0))),
        );
        assert_eq!(text(got.requests.as_ref(), "cpu").as_deref(), Some("1m"));
        assert_eq!(text(got.limits.as_ref(), "cpu").as_deref(), Some("5m"));
    }
}
