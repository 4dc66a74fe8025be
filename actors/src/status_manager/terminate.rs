//! `TerminatePod` (§7.2): the status a pod ends with when its containers are gone. Containers
//! that might have run and are not terminated become terminated with `ContainerStatusUnknown`
//! (exit 137); a Pending or Running pod becomes Failed.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
};

const UNKNOWN_REASON: &str = "ContainerStatusUnknown";
const UNKNOWN_MESSAGE: &str = "The container could not be located when the pod was terminated";

fn terminated(status: &ContainerStatus) -> bool {
    status
        .state
        .as_ref()
        .is_some_and(|state| state.terminated.is_some())
}

/// Whether the container ever left Waiting.
fn ever_started(status: &ContainerStatus) -> bool {
    let left_waiting = |state: &Option<ContainerState>| {
        state
            .as_ref()
            .is_some_and(|state| state.running.is_some() || state.terminated.is_some())
    };
    left_waiting(&status.state) || left_waiting(&status.last_state)
}

fn mark_unknown(status: &mut ContainerStatus) {
    status.last_state = status.state.take();
    status.ready = false;
    status.state = Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some(UNKNOWN_REASON.to_owned()),
            message: Some(UNKNOWN_MESSAGE.to_owned()),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    });
}

pub fn terminated_status(pod: &Pod, base: &PodStatus) -> PodStatus {
    let mut status = base.clone();
    let has_init = pod.spec.as_ref().is_some_and(|spec| {
        spec.init_containers
            .as_ref()
            .is_some_and(|init| !init.is_empty())
    });
    let app_started = status.container_statuses.iter().flatten().any(ever_started);
    let last_init_succeeded = status
        .init_container_statuses
        .as_ref()
        .and_then(|init| init.last())
        .and_then(|last| last.state.as_ref()?.terminated.as_ref())
        .is_some_and(|done| done.exit_code == 0);
    if !has_init || app_started || last_init_succeeded {
        for container in status
            .container_statuses
            .iter_mut()
            .flatten()
            .filter(|c| !terminated(c))
        {
            mark_unknown(container);
        }
    }
    if let Some(init) = status.init_container_statuses.as_mut() {
        // Every init container up to the last one that shows it started (at least the first).
        let started = init
            .iter()
            .rposition(ever_started)
            .map_or(1, |last| last + 1)
            .min(init.len());
        for container in init.iter_mut().take(started).filter(|c| !terminated(c)) {
            mark_unknown(container);
        }
    }
    if matches!(status.phase.as_deref(), Some("Pending" | "Running")) {
        status.phase = Some("Failed".to_owned());
    }
    status
}
