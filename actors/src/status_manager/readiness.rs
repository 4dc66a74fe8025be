//! `SetContainerReadiness` (§7.2): one container's `ready` flipped, and the pod's
//! `ContainersReady` and `Ready` conditions regenerated from all containers, appended when
//! missing. Pure: the cache's update applies transition times afterwards.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use super::merge::is_terminal;

/// The status with container `container_id` made `ready`, or `None` when that container is
/// not in the status or already says so.
pub fn with_container_readiness(
    pod: &Pod,
    status: &PodStatus,
    container_id: &str,
    ready: bool,
) -> Option<PodStatus> {
    let mut status = status.clone();
    let container = status
        .container_statuses
        .iter_mut()
        .flatten()
        .find(|c| c.container_id.as_deref() == Some(container_id))?;
    if container.ready == ready {
        return None;
    }
    container.ready = ready;
    let spec_containers: Vec<String> = pod
        .spec
        .as_ref()
        .map(|spec| spec.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let unready: Vec<String> = spec_containers
        .iter()
        .filter(|name| {
            !status
                .container_statuses
                .iter()
                .flatten()
                .any(|c| &c.name == *name && c.ready)
        })
        .cloned()
        .collect();
    let terminal = is_terminal(status.phase.as_deref());
    let condition = |kind: &str| {
        let (state, reason, message) = if terminal {
            ("False", Some("PodCompleted".to_owned()), None)
        } else if unready.is_empty() {
            ("True", None, None)
        } else {
            (
                "False",
                Some("ContainersNotReady".to_owned()),
                Some(format!(
                    "containers with unready status: [{}]",
                    unready.join(" ")
                )),
            )
        };
        PodCondition {
            type_: kind.to_owned(),
            status: state.to_owned(),
            reason,
            message,
            ..PodCondition::default()
        }
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for kind in ["ContainersReady", "Ready"] {
        let fresh = condition(kind);
        match conditions.iter_mut().find(|c| c.type_ == kind) {
            Some(existing) => {
                existing.status = fresh.status;
                existing.reason = fresh.reason;
                existing.message = fresh.message;
            }
            None => conditions.push(fresh),
        }
    }
    Some(status)
}
