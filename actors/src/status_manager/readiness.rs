//! `SetContainerReadiness` (§7.2): one container's `ready` flipped, and the pod's
//! `ContainersReady` and `Ready` conditions regenerated from all containers, appended when
//! missing, each observing the generation of the pod as StatusManager last saw it. Pure: the
//! cache's update applies transition times afterwards.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use super::{generation::observed_generation, merge::is_terminal};

/// The status with container `container_id` made `ready`, or `None` when that container is
/// not in the status or already says so.
pub fn with_container_readiness(
    pod: &Pod,
    status: &PodStatus,
    container_id: &str,
    ready: bool,
) -> Option<PodStatus> {
    let mut status = status.clone();
    // A regular container or a sidecar (a restartable init container, probed alike).
    let container = (status.container_statuses.iter_mut().flatten())
        .chain(status.init_container_statuses.iter_mut().flatten())
        .find(|c| c.container_id.as_deref() == Some(container_id))?;
    if container.ready == ready {
        return None;
    }
    container.ready = ready;
    // `ContainersReady` counts every sidecar and regular container (§4.2).
    let counted: Vec<(String, bool)> = pod
        .spec
        .as_ref()
        .map(|spec| {
            let sidecars = (spec.init_containers.iter().flatten())
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| (c.name.clone(), true));
            sidecars
                .chain(spec.containers.iter().map(|c| (c.name.clone(), false)))
                .collect()
        })
        .unwrap_or_default();
    let unready: Vec<String> = counted
        .into_iter()
        .filter(|(name, sidecar)| {
            let statuses = if *sidecar {
                &status.init_container_statuses
            } else {
                &status.container_statuses
            };
            !statuses
                .iter()
                .flatten()
                .any(|c| &c.name == name && c.ready)
        })
        .map(|(name, _)| name)
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
            observed_generation: observed_generation(pod),
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
                existing.observed_generation = fresh.observed_generation;
            }
            None => conditions.push(fresh),
        }
    }
    Some(status)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ContainerStatus;
    use serde_json::json;

    use super::*;

    fn status(id: &str, name: &str, ready: bool) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            container_id: Some(id.into()),
            ready,
            ..ContainerStatus::default()
        }
    }

    #[test]
    fn a_sidecar_counts_for_containers_ready_and_its_readiness_can_flip() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {
                "initContainers": [{"name": "proxy", "restartPolicy": "Always"},
                                   {"name": "setup"}],
                "containers": [{"name": "app"}],
            },
        }))
        .unwrap();
        let before = PodStatus {
            phase: Some("Running".into()),
            init_container_statuses: Some(vec![
                status("c://proxy", "proxy", false),
                status("c://setup", "setup", true),
            ]),
            container_statuses: Some(vec![status("c://app", "app", false)]),
            ..PodStatus::default()
        };
        let app_ready = with_container_readiness(&pod, &before, "c://app", true).unwrap();
        let ready = |status: &PodStatus, kind: &str| {
            let conditions = status.conditions.iter().flatten();
            let condition = conditions.clone().find(|c| c.type_ == kind).unwrap();
            (condition.status.clone(), condition.message.clone())
        };
        assert_eq!(
            ready(&app_ready, "ContainersReady"),
            (
                "False".to_owned(),
                Some("containers with unready status: [proxy]".to_owned())
            ),
            "the unready sidecar holds the pod back; the regular init container does not count"
        );
        let all_ready = with_container_readiness(&pod, &app_ready, "c://proxy", true).unwrap();
        assert_eq!(ready(&all_ready, "Ready"), ("True".to_owned(), None));
    }

    #[test]
    fn regenerated_conditions_observe_the_pods_generation() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u", "generation": 3},
            "spec": {"containers": [{"name": "app"}]},
        }))
        .unwrap();
        let before: PodStatus = serde_json::from_value(json!({
            "phase": "Running",
            "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "False", "observedGeneration": 2}],
            "containerStatuses": [{"name": "app", "containerID": "c://app", "ready": false,
                "restartCount": 0, "image": "i", "imageID": ""}],
        }))
        .unwrap();
        let after = with_container_readiness(&pod, &before, "c://app", true).unwrap();
        let generations: Vec<(String, Option<i64>)> = (after.conditions.iter().flatten())
            .map(|c| (c.type_.clone(), c.observed_generation))
            .collect();
        assert_eq!(
            generations,
            [
                ("Ready".to_owned(), Some(3)),
                ("ContainersReady".to_owned(), Some(3))
            ]
        );
        assert_eq!(
            after.observed_generation,
            Some(2),
            "the status's own is SetPodStatus's to move"
        );
    }
}
