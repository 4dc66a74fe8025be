//! The status a simulated pod shows at each stage, built the way the kubelet's
//! `generateAPIPodStatus` would for real containers: conditions in the kubelet's order
//! (PodReadyToStartContainers, Initialized, Ready, ContainersReady, PodScheduled; each observing
//! the pod's generation), container statuses sorted by name, the QoS class from requests and
//! limits. Pure: time is an argument.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};

use super::qos::qos_class;
use crate::status_manager::generation::stamp_conditions;

/// Where a simulated pod is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for an address: containers are being created.
    Pending,
    Running,
    /// Every container exited with `exit_code`; `ended` overrides the phase's reason and
    /// message (an eviction: phase Failed, reason `Evicted`).
    Finished {
        at: Timestamp,
        exit_code: i32,
        ended: Option<(String, String)>,
    },
}

/// What a status is built from, besides the pod and its stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub host_ip: Option<String>,
    pub pod_ip: Option<String>,
    pub started_at: Timestamp,
    /// Containers failing their readiness probe.
    pub unready: BTreeSet<String>,
}

/// The container ID a simulated container has: `simulated://<pod uid>-<name>`.
pub fn container_id(pod: &Pod, name: &str) -> String {
    format!(
        "simulated://{}-{name}",
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

fn app_containers(pod: &Pod) -> Vec<&Container> {
    let mut containers: Vec<&Container> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .collect();
    containers.sort_by(|a, b| a.name.cmp(&b.name));
    containers
}

fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default()
}

/// A pod condition of type `kind`, `True` or `False`, with its reason and message.
pub fn condition(
    kind: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..PodCondition::default()
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            message: None,
        }),
        ..ContainerState::default()
    }
}

fn terminated(
    pod: &Pod,
    name: &str,
    code: i32,
    started: Timestamp,
    at: Timestamp,
) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            reason: Some(if code == 0 { "Completed" } else { "Error" }.to_owned()),
            started_at: Some(Time(started)),
            finished_at: Some(Time(at)),
            container_id: Some(container_id(pod, name)),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn container_status(
    container: &Container,
    state: ContainerState,
    ready: bool,
    id: Option<String>,
) -> ContainerStatus {
    let started = state.running.is_some();
    ContainerStatus {
        name: container.name.clone(),
        image: container.image.clone().unwrap_or_default(),
        image_id: String::new(),
        container_id: id,
        ready,
        started: Some(started),
        restart_count: 0,
        state: Some(state),
        ..ContainerStatus::default()
    }
}

/// The pod's status at `stage`.
pub fn simulated_status(pod: &Pod, stage: &Stage, placement: &Placement) -> PodStatus {
    let started = placement.started_at;
    let init_statuses: Vec<ContainerStatus> = init_containers(pod)
        .iter()
        .map(|container| match stage {
            Stage::Pending => container_status(container, waiting("PodInitializing"), false, None),
            _ => container_status(
                container,
                terminated(pod, &container.name, 0, started, started),
                false,
                Some(container_id(pod, &container.name)),
            ),
        })
        .collect();
    let statuses: Vec<ContainerStatus> = app_containers(pod)
        .into_iter()
        .map(|container| {
            let id = Some(container_id(pod, &container.name));
            match stage {
                Stage::Pending => {
                    container_status(container, waiting("ContainerCreating"), false, None)
                }
                Stage::Running => container_status(
                    container,
                    ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(Time(started)),
                        }),
                        ..ContainerState::default()
                    },
                    !placement.unready.contains(&container.name),
                    id,
                ),
                Stage::Finished { at, exit_code, .. } => container_status(
                    container,
                    terminated(pod, &container.name, *exit_code, started, *at),
                    false,
                    id,
                ),
            }
        })
        .collect();

    let (phase, reason, message) = match stage {
        Stage::Pending => ("Pending", None, None),
        Stage::Running => ("Running", None, None),
        Stage::Finished {
            ended: Some((reason, message)),
            ..
        } => ("Failed", Some(reason.clone()), Some(message.clone())),
        Stage::Finished { exit_code: 0, .. } => ("Succeeded", None, None),
        Stage::Finished { .. } => ("Failed", None, None),
    };
    let unready: Vec<&str> = statuses
        .iter()
        .filter(|status| !status.ready)
        .map(|status| status.name.as_str())
        .collect();
    let (ready_reason, ready_message) = match stage {
        Stage::Finished { .. } => (Some("PodCompleted"), None),
        _ if unready.is_empty() => (None, None),
        _ => (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        ),
    };
    let ready = unready.is_empty() && matches!(stage, Stage::Running);
    let mut conditions = vec![
        condition(
            "PodReadyToStartContainers",
            matches!(stage, Stage::Running),
            None,
            None,
        ),
        condition("Initialized", true, None, None),
        condition("Ready", ready, ready_reason, ready_message.clone()),
        condition("ContainersReady", ready, ready_reason, ready_message),
        condition("PodScheduled", true, None, None),
    ];
    if let Stage::Finished {
        ended: Some((_, message)),
        ..
    } = stage
    {
        conditions.push(condition(
            "DisruptionTarget",
            true,
            Some("TerminationByKubelet"),
            Some(message.clone()),
        ));
    }
    stamp_conditions(pod, &mut conditions);

    let pod_ip = (!matches!(stage, Stage::Pending))
        .then(|| placement.pod_ip.clone())
        .flatten();
    PodStatus {
        phase: Some(phase.to_owned()),
        reason,
        message,
        conditions: Some(conditions),
        host_ip: placement.host_ip.clone(),
        host_ips: placement.host_ip.clone().map(|ip| vec![HostIP { ip }]),
        pod_ip: pod_ip.clone(),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]),
        start_time: Some(Time(started)),
        qos_class: Some(qos_class(pod).to_owned()),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(statuses),
        ..PodStatus::default()
    }
}
