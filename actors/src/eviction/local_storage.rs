//! Local-storage evictions (the kubelet's `localStorageEviction`, checked every pass before any
//! threshold): a pod whose emptyDir outgrew its `sizeLimit`, whose ephemeral storage outgrew
//! the pod's `ephemeral-storage` limit, or one of whose containers outgrew its own limit, is
//! evicted with the kubelet's message. Critical pods are never evicted. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::ranking::is_critical;
use crate::{
    messages::EvictPod,
    ports::{PodStats, PodStorage},
    quantity::{format_binary, value},
};

const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// The evictions the pods' measured storage calls for, at most one a pod, in `pods` order.
/// `dedicated_image_fs`: writable layers live on the image filesystem, so a container's limit
/// counts its logs alone (as the kubelet's `containerEphemeralStorageLimitEviction`).
pub fn local_storage_evictions(pods: &[PodStats], dedicated_image_fs: bool) -> Vec<EvictPod> {
    pods.iter()
        .filter(|stats| !is_critical(&stats.pod))
        .filter_map(|stats| {
            let storage = stats.storage.as_ref()?;
            let message = empty_dir_exceeded(&stats.pod, storage)
                .or_else(|| pod_limit_exceeded(&stats.pod, storage))
                .or_else(|| container_limit_exceeded(&stats.pod, storage, dedicated_image_fs))?;
            Some(EvictPod {
                pod: Box::new(Pod::clone(&stats.pod)),
                message,
                annotations: BTreeMap::new(),
            })
        })
        .collect()
}

/// An emptyDir whose use is above its positive `sizeLimit`.
fn empty_dir_exceeded(pod: &Pod, storage: &PodStorage) -> Option<String> {
    let volumes = pod.spec.as_ref()?.volumes.as_ref()?;
    volumes.iter().find_map(|volume| {
        let limit = volume.empty_dir.as_ref()?.size_limit.as_ref()?;
        let bytes = value(&limit.0).ok().filter(|bytes| *bytes > 0)?;
        let used = *storage.volumes.get(&volume.name)?;
        (i128::from(used) > i128::from(bytes)).then(|| {
            format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                volume.name, limit.0
            )
        })
    })
}

/// The pod's ephemeral storage above the sum of its containers' limits.
fn pod_limit_exceeded(pod: &Pod, storage: &PodStorage) -> Option<String> {
    let (limit, text) = pod_ephemeral_limit(pod)?;
    let used = storage.ephemeral_bytes.unwrap_or(0);
    (i128::from(used) > i128::from(limit)).then(|| {
        format!("Pod ephemeral local storage usage exceeds the total limit of containers {text}. ")
    })
}

/// A container's logs (and writable layer, when it shares the node's filesystem) above its
/// own non-zero limit; the first such container as measured.
fn container_limit_exceeded(
    pod: &Pod,
    storage: &PodStorage,
    dedicated_image_fs: bool,
) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    storage.containers.iter().find_map(|measured| {
        let container = spec.containers.iter().find(|c| c.name == measured.name)?;
        let (limit, text) = ephemeral_limit(container).filter(|(limit, _)| *limit != 0)?;
        let mut used = measured.logs_bytes.unwrap_or(0);
        if !dedicated_image_fs {
            used += measured.rootfs_bytes.unwrap_or(0);
        }
        (i128::from(used) > i128::from(limit)).then(|| {
            format!(
                "Container {} exceeded its local ephemeral storage limit {text:?}. ",
                measured.name
            )
        })
    })
}

/// A container's `ephemeral-storage` limit in bytes, and as written.
fn ephemeral_limit(container: &Container) -> Option<(i64, String)> {
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    let quantity = limits.get(EPHEMERAL_STORAGE)?;
    Some((value(&quantity.0).ok()?, quantity.0.clone()))
}

/// The pod's `ephemeral-storage` limit as the kubelet's `PodLimits` sums it: app containers and
/// sidecars, the larger of that and each init container with the sidecars started before it,
/// plus the overhead. `None` when no container sets one. As written when one container alone
/// sets it, else in binary units.
fn pod_ephemeral_limit(pod: &Pod) -> Option<(i64, String)> {
    let spec = pod.spec.as_ref()?;
    let mut setters = Vec::new();
    let mut sum = 0_i64;
    for container in &spec.containers {
        if let Some(limit) = ephemeral_limit(container) {
            sum += limit.0;
            setters.push(limit);
        }
    }
    let (mut sidecars, mut init_peak) = (0_i64, 0_i64);
    for container in spec.init_containers.iter().flatten() {
        let own = ephemeral_limit(container);
        let own_bytes = own.as_ref().map_or(0, |(bytes, _)| *bytes);
        // `restartPolicy: Always` makes a sidecar (eviction sits below `pods`, so not its helper).
        if container.restart_policy.as_deref() == Some("Always") {
            sum += own_bytes;
            sidecars += own_bytes;
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(own_bytes + sidecars);
        }
        setters.extend(own);
    }
    if setters.is_empty() {
        return None;
    }
    let mut limit = sum.max(init_peak);
    let overhead = (spec.overhead.as_ref())
        .and_then(|overhead| overhead.get(EPHEMERAL_STORAGE))
        .and_then(|quantity| value(&quantity.0).ok());
    if let Some(overhead) = overhead {
        limit += overhead;
    }
    let text = match setters.as_slice() {
        [(bytes, text)] if *bytes == limit => text.clone(),
        _ => format_binary(u64::try_from(limit).unwrap_or(0)),
    };
    Some((limit, text))
}
