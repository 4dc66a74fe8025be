//! A kept pod's lists cut to their length. A JSON array tells serde nothing of its length, so a
//! decoded list grows as a pushed-to `Vec` does: room for four elements at least (for elements
//! up to 1 KiB), then doubling. A pod keeps its one container status (752 bytes) in room for
//! four, its five conditions in room for eight, its token volume's three projections in room
//! for four: about 4 KiB of an 18 KiB pod, for as long as the node keeps the pod.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec, PodStatus, Volume};

/// Cuts the pod's lists (those a pod commonly has, and the lists within their elements) to
/// their length.
pub fn fit_lists(pod: &mut Pod) {
    fit(&mut pod.metadata.owner_references);
    fit(&mut pod.metadata.finalizers);
    if let Some(spec) = &mut pod.spec {
        fit_spec(spec);
    }
    if let Some(status) = &mut pod.status {
        fit_status(status);
    }
}

/// Shrinks the list and hands its elements on, for theirs.
fn fit<T>(list: &mut Option<Vec<T>>) -> &mut [T] {
    match list {
        Some(list) => {
            list.shrink_to_fit();
            list
        }
        None => &mut [],
    }
}

fn fit_spec(spec: &mut PodSpec) {
    spec.containers.shrink_to_fit();
    spec.containers.iter_mut().for_each(fit_container);
    fit(&mut spec.init_containers)
        .iter_mut()
        .for_each(fit_container);
    fit(&mut spec.ephemeral_containers)
        .iter_mut()
        .for_each(fit_ephemeral);
    fit(&mut spec.volumes).iter_mut().for_each(fit_volume);
    fit(&mut spec.tolerations);
    fit(&mut spec.image_pull_secrets);
    fit(&mut spec.readiness_gates);
    fit(&mut spec.resource_claims);
    fit(&mut spec.scheduling_gates);
    fit(&mut spec.topology_spread_constraints);
    for alias in fit(&mut spec.host_aliases) {
        fit(&mut alias.hostnames);
    }
}

/// The lists a container and an ephemeral container both have (their types are twins).
macro_rules! fit_container_lists {
    ($container:expr) => {{
        let container = $container;
        fit(&mut container.command);
        fit(&mut container.args);
        fit(&mut container.env);
        fit(&mut container.env_from);
        fit(&mut container.ports);
        fit(&mut container.volume_mounts);
        fit(&mut container.volume_devices);
        fit(&mut container.resize_policy);
        fit(&mut container.restart_policy_rules);
    }};
}

fn fit_container(container: &mut Container) {
    fit_container_lists!(container);
}

fn fit_ephemeral(container: &mut EphemeralContainer) {
    fit_container_lists!(container);
}

/// The items of a `configMap`, `secret` and `downwardAPI` source, of a volume or of a projection
/// (twin types with the same field names).
macro_rules! fit_items {
    ($sources:expr) => {{
        let sources = $sources;
        if let Some(config_map) = &mut sources.config_map {
            fit(&mut config_map.items);
        }
        if let Some(secret) = &mut sources.secret {
            fit(&mut secret.items);
        }
        if let Some(downward_api) = &mut sources.downward_api {
            fit(&mut downward_api.items);
        }
    }};
}

fn fit_volume(volume: &mut Volume) {
    if let Some(projected) = &mut volume.projected {
        for source in fit(&mut projected.sources) {
            fit_items!(source);
        }
    }
    fit_items!(volume);
}

fn fit_status(status: &mut PodStatus) {
    fit(&mut status.conditions);
    fit(&mut status.host_ips);
    fit(&mut status.pod_ips);
    fit(&mut status.resource_claim_statuses);
    for statuses in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
        &mut status.ephemeral_container_statuses,
    ] {
        for container in fit(statuses) {
            fit(&mut container.volume_mounts);
            fit(&mut container.allocated_resources_status);
        }
    }
}

#[cfg(test)]
#[path = "fit_lists_tests.rs"]
pub(crate) mod tests;
