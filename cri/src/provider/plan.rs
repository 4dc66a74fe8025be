//! The kubelet's `computePodActions`: from the pod spec and what the runtime holds, whether a
//! new sandbox is needed, which container starts next (init containers one at a time, sidecars
//! started in order and kept running, then the app containers in spec order) and whether the
//! pod is done and its containers and sandbox can stop. Pure; back-off and images are the
//! worker's business.

use k8s_openapi::api::core::v1::{Container, ContainerRestartRule, Pod};

use super::view::PodRuntime;
use nodepulse_actors::ports::{ContainerState, ContainerStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("Never") => Self::Never,
            Some("OnFailure") => Self::OnFailure,
            _ => Self::Always,
        }
    }

    /// Whether a container that exited with `exit_code` starts again.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => exit_code != 0,
            Self::Never => false,
        }
    }
}

/// `podutil.ContainerShouldRestart` (ContainerRestartRules, on in 1.36): whether `container`,
/// exited with `exit_code`, starts again. A container with its own `restartPolicy` goes by its
/// first matching `restartPolicyRules` entry, else that policy; one without, by the pod's.
pub fn should_restart(container: &Container, pod: &Pod, exit_code: i32) -> bool {
    if let Some(own) = container.restart_policy.as_deref() {
        let action = matching_rule(container, exit_code).map(|rule| rule.action.as_str());
        if matches!(action, Some("Restart" | "RestartAllContainers")) {
            return true;
        }
        match own {
            "Always" => return true,
            "OnFailure" => return exit_code != 0,
            "Never" => return false,
            _ => {}
        }
    }
    RestartPolicy::of(pod).restarts(exit_code)
}

/// `podutil.FindMatchingContainerRestartRule`: the first rule whose exit codes match.
fn matching_rule(container: &Container, exit_code: i32) -> Option<&ContainerRestartRule> {
    (container.restart_policy_rules.iter().flatten()).find(|rule| {
        let Some(codes) = &rule.exit_codes else {
            return false;
        };
        let listed = codes.values.iter().flatten().any(|&code| code == exit_code);
        match codes.operator.as_str() {
            "In" => listed,
            "NotIn" => !listed,
            _ => false,
        }
    })
}

/// Whether the container is init or app: init containers start one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Init,
    App,
    /// Added through the `ephemeralcontainers` subresource: started once, never restarted.
    Ephemeral,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// RunPodSandbox with this attempt number.
    pub create_sandbox: Option<u32>,
    /// Containers to start, in order.
    pub start: Vec<(Kind, String)>,
    /// Nothing runs and nothing will: stop the sandbox.
    pub kill_pod: bool,
}

/// A restartable init container (`restartPolicy: Always`): a sidecar, which keeps running
/// beside the app containers and is restarted whatever the pod's policy.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// Whether a running sidecar counts as started, so the next container may start: running,
/// and past its startup probe when it has one (`started`, the prober's verdict).
fn sidecar_started(
    init: &Container,
    status: &ContainerStatus,
    started: &dyn Fn(&Container, &ContainerStatus) -> bool,
) -> bool {
    status.state == ContainerState::Running && started(init, status)
}

pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default()
}

pub fn app_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default()
}

/// The pod's ephemeral containers as containers (the same fields, less `targetContainerName`).
pub fn ephemeral_containers(pod: &Pod) -> Vec<Container> {
    (pod.spec.as_ref())
        .and_then(|spec| spec.ephemeral_containers.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|ephemeral| {
            serde_json::to_value(ephemeral)
                .ok()
                .and_then(|value| serde_json::from_value(value).ok())
        })
        .collect()
}

/// The `targetContainerName` of the ephemeral container `name`, if it has one.
pub fn ephemeral_target<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    (pod.spec.as_ref())
        .and_then(|spec| spec.ephemeral_containers.as_ref())?
        .iter()
        .find(|ephemeral| ephemeral.name == name)?
        .target_container_name
        .as_deref()
        .filter(|target| !target.is_empty())
}

pub fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.host_network)
        .unwrap_or(false)
}

fn succeeded(status: &ContainerStatus) -> bool {
    status.state == ContainerState::Exited && status.exit_code == 0
}

/// `ShouldContainerBeRestarted`: whether the newest instance (if any) of `container` asks for
/// a start.
fn wants_start(container: &Container, pod: &Pod, newest: Option<&ContainerStatus>) -> bool {
    match newest {
        None => true,
        Some(status) => match status.state {
            ContainerState::Created | ContainerState::Unknown => true,
            ContainerState::Running => false,
            ContainerState::Exited => should_restart(container, pod, status.exit_code),
        },
    }
}

/// What to do for `pod` now that the runtime holds `runtime`.
#[cfg(test)]
pub fn plan(pod: &Pod, runtime: &PodRuntime) -> Plan {
    plan_with(pod, runtime, &|_, _| true)
}

/// [`plan`], with the prober's word on whether a running container is started (past its
/// startup probe): a sidecar holds the containers after it back until it is.
pub fn plan_with(
    pod: &Pod,
    runtime: &PodRuntime,
    started: &dyn Fn(&Container, &ContainerStatus) -> bool,
) -> Plan {
    let policy = RestartPolicy::of(pod);
    let newest_sandbox = runtime.newest_sandbox();
    let needs_sandbox = runtime
        .ready_sandbox()
        .is_none_or(|sandbox| !host_network(pod) && sandbox.ips.is_empty());
    if needs_sandbox {
        let attempt = newest_sandbox.map_or(0, |sandbox| sandbox.metadata.attempt + 1);
        // A pod that never restarts and already ran is done; its sandbox is not made again.
        if policy == RestartPolicy::Never
            && newest_sandbox.is_some()
            && !runtime.containers.is_empty()
        {
            return Plan::default();
        }
        let start: Vec<(Kind, String)> = match init_containers(pod).first() {
            Some(first) => vec![(Kind::Init, first.name.clone())],
            None => app_containers(pod)
                .iter()
                .filter(|c| {
                    policy != RestartPolicy::OnFailure
                        || !runtime.newest(&c.name).is_some_and(succeeded)
                })
                .map(|c| (Kind::App, c.name.clone()))
                .collect(),
        };
        let app_created = app_containers(pod)
            .iter()
            .any(|c| runtime.newest(&c.name).is_some());
        if start.is_empty() && app_created {
            return Plan::default();
        }
        return Plan {
            create_sandbox: Some(attempt),
            start,
            kill_pod: false,
        };
    }
    let app_started = app_containers(pod)
        .iter()
        .any(|c| runtime.newest(&c.name).is_some());
    // As the kubelet's `computePodActions`: an ephemeral container never created starts in a
    // running sandbox, initialised or not, and never again.
    let mut start: Vec<(Kind, String)> = ephemeral_containers(pod)
        .into_iter()
        .filter(|c| runtime.newest(&c.name).is_none())
        .map(|c| (Kind::Ephemeral, c.name))
        .collect();
    match init_step(pod, runtime, app_started, started) {
        InitStep::Wait(init) => {
            start.extend(init);
            return Plan {
                start,
                ..Plan::default()
            };
        }
        InitStep::KillPod => {
            return Plan {
                kill_pod: true,
                ..Plan::default()
            };
        }
        InitStep::Done(sidecars) => start.extend(sidecars),
    }
    let apps: Vec<(Kind, String)> = app_containers(pod)
        .iter()
        .filter(|c| wants_start(c, pod, runtime.newest(&c.name)))
        .map(|c| (Kind::App, c.name.clone()))
        .collect();
    let app_running = app_containers(pod).iter().any(|c| {
        runtime
            .newest(&c.name)
            .is_some_and(|s| s.state == ContainerState::Running)
    });
    // Nothing of the app runs or will: the pod is done, and its sidecars are not restarted to
    // keep it alive (the kubelet clears `InitContainersToStart`).
    if apps.is_empty() && !app_running {
        return Plan {
            kill_pod: true,
            ..Plan::default()
        };
    }
    start.extend(apps);
    Plan {
        create_sandbox: None,
        start,
        kill_pod: false,
    }
}

/// Where the init containers stand.
#[derive(Debug, PartialEq, Eq)]
enum InitStep {
    /// Not initialized yet: start these (possibly none) and wait.
    Wait(Vec<(Kind, String)>),
    /// A regular init container failed under `Never`: the pod ends.
    KillPod,
    /// Initialized: restart these exited sidecars beside the app containers.
    Done(Vec<(Kind, String)>),
}

/// The kubelet's `computeInitContainerActions`: regular init containers strictly in order to
/// completion; a sidecar starts in its turn, and the next one waits until it is started;
/// exited sidecars are restarted. Once an app container was started, regular init containers
/// count as done.
fn init_step(
    pod: &Pod,
    runtime: &PodRuntime,
    app_started: bool,
    started: &dyn Fn(&Container, &ContainerStatus) -> bool,
) -> InitStep {
    let mut start = Vec::new();
    for init in init_containers(pod) {
        let newest = runtime.newest(&init.name);
        let entry = (Kind::Init, init.name.clone());
        if is_sidecar(init) {
            match newest {
                Some(status) if sidecar_started(init, status, started) => {}
                Some(status) if status.state == ContainerState::Exited => start.push(entry),
                // Running but not started yet (a startup probe): the next one waits.
                Some(status) if status.state == ContainerState::Running => {
                    if !app_started {
                        return InitStep::Wait(start);
                    }
                }
                _ => {
                    start.push(entry);
                    if !app_started {
                        return InitStep::Wait(start);
                    }
                }
            }
            continue;
        }
        if app_started {
            continue;
        }
        match newest {
            Some(status) if succeeded(status) => {}
            Some(status) if status.state == ContainerState::Running => {
                return InitStep::Wait(start);
            }
            Some(status) if status.state == ContainerState::Exited => {
                if !should_restart(init, pod, status.exit_code) {
                    return InitStep::KillPod;
                }
                start.push(entry);
                return InitStep::Wait(start);
            }
            _ => {
                start.push(entry);
                return InitStep::Wait(start);
            }
        }
    }
    InitStep::Done(start)
}
