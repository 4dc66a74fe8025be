//! Which pod to evict (steps 9–12 of the kubelet's eviction pass): the threshold to act on
//! (memory signals first), the pods ranked for its resource — memory and disk: those using
//! more than they requested first, then lower priority, then the largest use above request;
//! PIDs: lower priority, then the most processes; pods without stats before all — and the
//! first one that is not critical, with the kubelet's message and event annotations. Pure.

use std::{cmp::Ordering, collections::BTreeMap};

use k8s_openapi::api::core::v1::Pod;

use super::{
    signals::{Observations, Signal},
    thresholds::Threshold,
};
use crate::{
    messages::EvictPod,
    ports::{ContainerStats, PodStats},
    quantity::{format_binary, parse_quantity},
};

/// `SystemCriticalPriority`: pods at or above it are critical.
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// The resource a signal's eviction reclaims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Memory,
    EphemeralStorage,
    Inodes,
    Pids,
}

impl Resource {
    pub fn of(signal: Signal) -> Self {
        match signal {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Self::Memory,
            Signal::NodefsAvailable | Signal::ImagefsAvailable => Self::EphemeralStorage,
            Signal::NodefsInodesFree | Signal::ImagefsInodesFree => Self::Inodes,
            Signal::PidAvailable => Self::Pids,
        }
    }

    /// The name in the eviction message: `memory`, `ephemeral-storage`, `inodes`, `pids`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::EphemeralStorage => "ephemeral-storage",
            Self::Inodes => "inodes",
            Self::Pids => "pids",
        }
    }
}

/// Critical pods are never evicted: static and mirror pods, and pods at system-critical
/// priority. Where no admission controller has resolved `priority` (the emulator), the two
/// system priority classes count as what they resolve to on a real cluster.
pub fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let mirror = annotations.is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    let static_pod = annotations
        .and_then(|a| a.get(SOURCE_ANNOTATION))
        .is_some_and(|source| source != "api");
    let spec = pod.spec.as_ref();
    let priority = spec.and_then(|spec| spec.priority);
    let class = spec.and_then(|spec| spec.priority_class_name.as_deref());
    mirror
        || static_pod
        || priority.is_some_and(|priority| priority >= SYSTEM_CRITICAL_PRIORITY)
        || (priority.is_none()
            && matches!(
                class,
                Some("system-node-critical" | "system-cluster-critical")
            ))
}

fn priority(pod: &Pod) -> i32 {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.priority)
        .unwrap_or(0)
}

/// What a container requested of `resource`, in bytes.
fn request(pod: &Pod, container: &str, resource: Resource) -> u64 {
    let key = match resource {
        Resource::Memory => "memory",
        Resource::EphemeralStorage => "ephemeral-storage",
        Resource::Inodes | Resource::Pids => return 0,
    };
    pod.spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .find(|c| c.name == container)
        .and_then(|c| c.resources.as_ref()?.requests.as_ref()?.get(key).cloned())
        .and_then(|quantity| parse_quantity(&quantity.0).ok())
        .map_or(0, |amount| amount as u64)
}

fn used(container: &ContainerStats, resource: Resource) -> u64 {
    match resource {
        Resource::Memory => container.memory_bytes,
        Resource::EphemeralStorage => container.ephemeral_storage_bytes,
        Resource::Inodes | Resource::Pids => 0,
    }
}

/// Use and request of the whole pod, or `None` without stats.
fn usage(stats: &PodStats, resource: Resource) -> Option<(u64, u64)> {
    let containers = stats.containers.as_ref()?;
    Some(containers.iter().fold((0, 0), |(use_, req), container| {
        (
            use_ + used(container, resource),
            req + request(&stats.pod, &container.name, resource),
        )
    }))
}

/// `true` first.
fn first_if(a: bool, b: bool) -> Ordering {
    b.cmp(&a)
}

fn compare(a: &PodStats, b: &PodStats, resource: Resource) -> Ordering {
    if resource == Resource::Pids {
        let without_stats = first_if(a.processes.is_none(), b.processes.is_none());
        return without_stats
            .then(priority(&a.pod).cmp(&priority(&b.pod)))
            .then(b.processes.unwrap_or(0).cmp(&a.processes.unwrap_or(0)));
    }
    match (usage(a, resource), usage(b, resource)) {
        (None, None) => priority(&a.pod).cmp(&priority(&b.pod)),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((use_a, req_a)), Some((use_b, req_b))) => first_if(use_a > req_a, use_b > req_b)
            .then(priority(&a.pod).cmp(&priority(&b.pod)))
            .then(
                (i128::from(use_b) - i128::from(req_b))
                    .cmp(&(i128::from(use_a) - i128::from(req_a))),
            ),
    }
}

/// The pods in eviction order for `resource`.
pub fn rank(mut pods: Vec<PodStats>, resource: Resource) -> Vec<PodStats> {
    pods.sort_by(|a, b| compare(a, b, resource));
    pods
}

/// The threshold an eviction acts on: eligible ones, memory signals first.
pub fn threshold_to_reclaim(
    thresholds: &[Threshold],
    eligible: impl IntoIterator<Item = usize>,
) -> Option<&Threshold> {
    eligible
        .into_iter()
        .filter_map(|index| thresholds.get(index))
        .min_by_key(|threshold| Resource::of(threshold.signal) != Resource::Memory)
}

/// The eviction of the first pod that may be evicted, to reclaim what `threshold` watches.
pub fn choose_eviction(
    threshold: &Threshold,
    observations: &Observations,
    pods: Vec<PodStats>,
) -> Option<EvictPod> {
    let resource = Resource::of(threshold.signal);
    let victim = rank(pods, resource)
        .into_iter()
        .find(|stats| !is_critical(&stats.pod))?;
    let mut message = format!("The node was low on resource: {}. ", resource.name());
    if let Some(observation) = observations.get(&threshold.signal) {
        let quantity = |amount: u64| match resource {
            Resource::Memory | Resource::EphemeralStorage => format_binary(amount),
            Resource::Inodes | Resource::Pids => amount.to_string(),
        };
        message.push_str(&format!(
            "Threshold quantity: {}, available: {}. ",
            quantity(threshold.value.amount(observation.capacity)),
            quantity(observation.available)
        ));
    }
    let (mut offending, mut offending_usage) = (Vec::new(), Vec::new());
    for container in victim.containers.iter().flatten() {
        let (use_, req) = (
            used(container, resource),
            request(&victim.pod, &container.name, resource),
        );
        if matches!(resource, Resource::Memory | Resource::EphemeralStorage) && use_ > req {
            message.push_str(&format!(
                "Container {} was using {}, which exceeds its request of {}. ",
                container.name,
                format_binary(use_),
                format_binary(req)
            ));
            offending.push(container.name.clone());
            offending_usage.push(format_binary(use_));
        }
    }
    let annotations = BTreeMap::from([
        ("offending_containers".to_owned(), offending.join(",")),
        (
            "offending_containers_usage".to_owned(),
            offending_usage.join(","),
        ),
        ("starved_resource".to_owned(), resource.name().to_owned()),
    ]);
    Some(EvictPod {
        pod: Box::new(Pod::clone(&victim.pod)),
        message,
        annotations,
    })
}
