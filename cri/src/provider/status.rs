//! The kubelet's `generateAPIPodStatus` over what the runtime holds: container statuses from
//! the newest two instances of each container (state, lastState), the waiting reason of the
//! last failed start, the phase by `getPhase`, conditions in the kubelet's order (each observing
//! the pod's generation), pod IPs from the sandbox. Shares the condition builder and QoS class
//! with the simulated provider. Pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::{
    api::core::v1::{
        Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, ContainerStatus as ApiStatus, HostIP, Pod, PodCondition, PodIP,
        PodStatus,
    },
    apimachinery::pkg::apis::meta::v1::Time,
};

use super::{
    plan::{
        app_containers, ephemeral_containers, host_network, init_containers, is_sidecar,
        should_restart,
    },
    status_resources::{allocated_resources, status_resources},
    termination_message::{MAX_POD_MESSAGE_BYTES, truncated},
    view::{PodRuntime, restart_count},
};
use nodepulse_actors::{
    pods::{condition, qos_class, readiness_gates},
    ports::{ContainerState, ContainerStatus},
    prober::PodProbeView,
    status_manager::generation::stamp_conditions,
};

/// Why a container's last start failed: its waiting reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub reason: String,
    pub message: String,
}

/// What a status is built from besides the pod and the runtime.
#[derive(Debug, Clone, Default)]
pub struct StatusInputs<'a> {
    /// The runtime's name for container IDs (`containerd`).
    pub runtime_name: &'a str,
    pub host_ips: &'a [String],
    /// Pod IPs already reported: kept once the sandbox is gone.
    pub known_pod_ips: &'a [String],
    pub start_time: Option<Timestamp>,
    pub errors: Option<&'a BTreeMap<String, StartError>>,
    /// The pod is being torn down for good: a pod whose containers all stopped is finished.
    pub terminal: bool,
    /// Why the kubelet failed the pod (an eviction, its active deadline): phase Failed with
    /// this reason and message.
    pub evicted: Option<(&'a str, &'a str)>,
    /// An eviction, which the DisruptionTarget condition shows (a deadline is none).
    pub disruption: bool,
    /// The prober's results for this pod: `started` and `ready` of running app containers
    /// follow them; `None` (no prober) reports a running container started and ready.
    pub probes: Option<PodProbeView<'a>>,
    /// A running container does not yet hold the CPU and memory its spec asks for: the
    /// kubelet's PodResizeInProgress condition is shown until it does.
    pub resizing: bool,
}

fn time(nanos: i64) -> Option<Time> {
    (nanos > 0)
        .then(|| Timestamp::from_nanosecond(i128::from(nanos)).ok())
        .flatten()
        .map(Time)
}

fn waiting(reason: Option<&str>, message: Option<&str>) -> ApiState {
    ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
        }),
        ..ApiState::default()
    }
}

fn api_state(status: &ContainerStatus, runtime_name: &str) -> ApiState {
    match status.state {
        ContainerState::Running => ApiState {
            running: Some(ContainerStateRunning {
                started_at: time(status.started_at),
            }),
            ..ApiState::default()
        },
        ContainerState::Exited => ApiState {
            terminated: Some(ContainerStateTerminated {
                exit_code: status.exit_code,
                reason: (!status.reason.is_empty()).then(|| status.reason.clone()),
                message: (!status.message.is_empty()).then(|| status.message.clone()),
                started_at: time(status.started_at),
                finished_at: time(status.finished_at),
                container_id: Some(format!("{runtime_name}://{}", status.id)),
                ..ContainerStateTerminated::default()
            }),
            ..ApiState::default()
        },
        ContainerState::Created | ContainerState::Unknown => waiting(None, None),
    }
}

/// What a container is to the pod, which decides its `started` and `ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Init,
    Sidecar,
    App,
    /// Never probed nor restarted: `ready` stays false and `started` unset, as the kubelet's.
    Ephemeral,
}

impl Role {
    fn of_init(container: &Container) -> Self {
        if is_sidecar(container) {
            Self::Sidecar
        } else {
            Self::Init
        }
    }
}

fn container_status(
    container: &Container,
    runtime: &PodRuntime,
    inputs: &StatusInputs<'_>,
    fresh_reason: &str,
    role: Role,
    pod: &Pod,
) -> ApiStatus {
    let mut instances = runtime.instances(&container.name);
    let newest = instances.next();
    // Only a container that starts again shows why its last start failed (the kubelet's
    // `ShouldContainerBeRestarted`); one the policy leaves exited shows how it ended.
    let restarts = match role {
        Role::Sidecar => true,
        Role::Ephemeral => newest.is_none(),
        Role::Init | Role::App => newest.is_none_or(|n| {
            n.state != ContainerState::Exited || should_restart(container, pod, n.exit_code)
        }),
    };
    let previous = instances.next();
    let mut status = ApiStatus {
        name: container.name.clone(),
        image: container.image.clone().unwrap_or_default(),
        state: Some(waiting(Some(fresh_reason), None)),
        started: (role != Role::Ephemeral).then_some(false),
        ..ApiStatus::default()
    };
    if let Some(newest) = newest {
        let running = newest.state == ContainerState::Running;
        status.state = Some(api_state(newest, inputs.runtime_name));
        status.container_id = Some(format!("{}://{}", inputs.runtime_name, newest.id));
        status.image = if newest.image.is_empty() {
            status.image
        } else {
            newest.image.clone()
        };
        status.image_id = newest.image_ref.clone();
        // As the kubelet, for each container the runtime has an instance of.
        status.resources = Some(status_resources(container, newest));
        status.allocated_resources = allocated_resources(container);
        status.restart_count = i32::try_from(restart_count(newest)).unwrap_or(i32::MAX);
        let container_id = status.container_id.as_deref().unwrap_or_default();
        // Sidecars and app containers are started once running and past any startup probe,
        // ready once started and past any readiness probe (the prober's results); regular
        // init containers are ready once they exited 0 (§4.3).
        let (started, ready) = match (role, inputs.probes) {
            (Role::Sidecar | Role::App, Some(probes)) if running => {
                probes.started_and_ready(container, container_id)
            }
            _ => (running, running),
        };
        status.started = (role != Role::Ephemeral).then_some(started);
        status.ready = match role {
            Role::Init => newest.state == ContainerState::Exited && newest.exit_code == 0,
            Role::Sidecar | Role::App => ready,
            Role::Ephemeral => false,
        };
        status.last_state = previous
            .filter(|p| p.state == ContainerState::Exited)
            .map(|p| api_state(p, inputs.runtime_name));
    }
    let error = inputs
        .errors
        .and_then(|errors| errors.get(&container.name))
        .filter(|_| restarts);
    if let Some(error) = error {
        let wants_start = status.state.as_ref().is_none_or(|s| s.running.is_none());
        if wants_start {
            if let Some(state) = status.state.take().filter(|s| s.terminated.is_some()) {
                status.last_state = Some(state);
            }
            status.state = Some(waiting(Some(&error.reason), Some(&error.message)));
        }
    }
    status
}

/// Each terminated state's message cut to `max` bytes.
fn cap_messages(status: &mut ApiStatus, max: usize) {
    let states = status.state.iter_mut().chain(status.last_state.iter_mut());
    for terminated in states.filter_map(|s| s.terminated.as_mut()) {
        if let Some(message) = terminated.message.as_mut() {
            let cut = truncated(message, max).len();
            message.truncate(cut);
        }
    }
}

fn terminated_code(status: &ApiStatus) -> Option<i32> {
    status
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

fn last_terminated_code(status: &ApiStatus) -> Option<i32> {
    status
        .last_state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// `getPhase` with ContainerRestartRules (on in 1.36): whether a stopped container restarts
/// is its own rules' and policy's call before the pod's. Sidecars hold the pod Pending only
/// while not started and before any app container started; a terminated one is ignored, and a
/// running one counts as running (§4.1): a pod whose app containers ended is Running until the
/// provider has stopped its sidecars, then Succeeded or Failed.
fn phase(pod: &Pod, init: &[ApiStatus], apps: &[ApiStatus], terminal: bool) -> &'static str {
    let mut pending_init = false;
    let mut pending_sidecar = false;
    let mut failed_init = false;
    let mut failed_init_for_good = false;
    let mut sidecars_running = 0;
    for (container, status) in init_containers(pod).iter().zip(init) {
        let state = status.state.clone().unwrap_or_default();
        if is_sidecar(container) {
            let unstarted = match (&state.running, &state.waiting) {
                (Some(_), _) => status.started != Some(true),
                (None, Some(_)) => last_terminated_code(status).is_none(),
                (None, None) => state.terminated.is_none(),
            };
            pending_sidecar |= unstarted;
            if state.running.is_some() {
                sidecars_running += 1;
            }
            continue;
        }
        if state.running.is_some()
            || (state.waiting.is_some() && last_terminated_code(status).is_none())
        {
            pending_init = true;
        } else if let Some(code) = terminated_code(status).or_else(|| last_terminated_code(status))
            && code != 0
        {
            // A failed init container holds the pod back while it may run again.
            failed_init = true;
            pending_init = true;
            failed_init_for_good |= !should_restart(container, pod, code);
        }
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    let mut stopped_for_good = 0;
    for (container, status) in app_containers(pod).iter().zip(apps) {
        let state = status.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(code) = (state.terminated.as_ref().map(|t| t.exit_code))
            .or_else(|| last_terminated_code(status))
        {
            stopped += 1;
            if state.terminated.is_some() && code == 0 {
                succeeded += 1;
            }
            if !should_restart(container, pod, code) {
                stopped_for_good += 1;
            }
        } else {
            waiting += 1;
        }
    }
    if failed_init_for_good {
        return "Failed";
    }
    let app_started = running + stopped > 0;
    if (pending_init || (pending_sidecar && !app_started)) && !terminal {
        return "Pending";
    }
    if waiting > 0 && !terminal {
        return "Pending";
    }
    if running + sidecars_running > 0 {
        return "Running";
    }
    if stopped > 0 || terminal {
        if terminal {
            return if succeeded == stopped && waiting == 0 && !failed_init {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        // Some stopped container will start again.
        if stopped != stopped_for_good {
            return "Running";
        }
        return if succeeded == stopped {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    "Pending"
}

fn names(statuses: &[&ApiStatus]) -> String {
    let names: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
    format!("[{}]", names.join(" "))
}

fn conditions(
    pod: &Pod,
    init: &[ApiStatus],
    apps: &[ApiStatus],
    phase: &str,
    sandbox_ready: bool,
    evicted: Option<(&str, &str)>,
) -> Vec<PodCondition> {
    let mut conditions = Vec::new();
    if let Some((_, message)) = evicted {
        conditions.push(condition(
            "DisruptionTarget",
            true,
            Some("TerminationByKubelet"),
            Some(message.to_owned()),
        ));
    }
    conditions.push(condition(
        "PodReadyToStartContainers",
        sandbox_ready,
        None,
        None,
    ));
    let app_started = apps.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
            || s.last_state.is_some()
    });
    // Done: a regular init container once ready (exited 0), a sidecar once started.
    let incomplete: Vec<&ApiStatus> = init_containers(pod)
        .iter()
        .zip(init)
        .filter(|(container, status)| {
            if is_sidecar(container) {
                status.started != Some(true)
            } else {
                !status.ready
            }
        })
        .map(|(_, status)| status)
        .collect();
    conditions.push(if phase == "Succeeded" {
        condition("Initialized", true, Some("PodCompleted"), None)
    } else if incomplete.is_empty() || app_started {
        condition("Initialized", true, None, None)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                names(&incomplete)
            )),
        )
    });
    // Sidecars first, in spec order, then the app containers, as the kubelet lists them.
    let sidecars = init_containers(pod)
        .iter()
        .zip(init)
        .filter(|(container, _)| is_sidecar(container))
        .map(|(_, status)| status);
    let unready: Vec<&ApiStatus> = sidecars.chain(apps).filter(|s| !s.ready).collect();
    let ready = match phase {
        "Succeeded" => condition("ContainersReady", false, Some("PodCompleted"), None),
        "Failed" => condition("ContainersReady", false, Some("PodFailed"), None),
        _ if unready.is_empty() => condition("ContainersReady", true, None, None),
        _ => condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                names(&unready)
            )),
        ),
    };
    // Ready is ContainersReady, held back further by readiness gates still not True.
    let gated = (ready.status == "True")
        .then(|| readiness_gates::unready_message(pod))
        .flatten();
    conditions.push(match gated {
        Some(message) => condition(
            "Ready",
            false,
            Some(readiness_gates::NOT_READY_REASON),
            Some(message),
        ),
        None => PodCondition {
            type_: "Ready".to_owned(),
            ..ready.clone()
        },
    });
    conditions.push(ready);
    conditions.push(condition("PodScheduled", true, None, None));
    stamp_conditions(pod, &mut conditions);
    conditions
}

/// PodResizeInProgress first, as the kubelet appends the resize conditions first.
fn with_resize_condition(
    pod: &Pod,
    resizing: bool,
    mut conditions: Vec<PodCondition>,
) -> Vec<PodCondition> {
    if resizing {
        let mut resize = vec![condition("PodResizeInProgress", true, None, None)];
        stamp_conditions(pod, &mut resize);
        conditions.splice(0..0, resize);
    }
    conditions
}

/// At most one address per family, the pod's primary (first) family first.
fn pod_ips(ips: &[String]) -> Vec<String> {
    let mut chosen: Vec<String> = Vec::new();
    for ip in ips {
        let v6 = ip.contains(':');
        if chosen.iter().all(|c| c.contains(':') != v6) {
            chosen.push(ip.clone());
        }
    }
    chosen
}

/// The pod's status as the kubelet would report it now.
pub fn pod_status(pod: &Pod, runtime: &PodRuntime, inputs: &StatusInputs<'_>) -> PodStatus {
    let has_init = !init_containers(pod).is_empty();
    let mut init: Vec<ApiStatus> = init_containers(pod)
        .iter()
        .map(|c| {
            let role = Role::of_init(c);
            container_status(c, runtime, inputs, "PodInitializing", role, pod)
        })
        .collect();
    let app_reason = if has_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let mut apps: Vec<ApiStatus> = app_containers(pod)
        .iter()
        .map(|c| container_status(c, runtime, inputs, app_reason, Role::App, pod))
        .collect();
    apps.sort_by(|a, b| a.name.cmp(&b.name));
    let ephemeral: Vec<ApiStatus> = ephemeral_containers(pod)
        .iter()
        .map(|c| container_status(c, runtime, inputs, app_reason, Role::Ephemeral, pod))
        .collect();
    // The kubelet's status manager shares 12 KiB of termination messages among the containers.
    let share = MAX_POD_MESSAGE_BYTES / (init.len() + apps.len()).max(1);
    for status in init.iter_mut().chain(apps.iter_mut()) {
        cap_messages(status, share);
    }
    let mut phase = phase(pod, &init, &apps, inputs.terminal);
    if inputs.evicted.is_some() {
        phase = "Failed";
    }
    let sandbox_ready = runtime
        .ready_sandbox()
        .is_some_and(|s| host_network(pod) || !s.ips.is_empty());
    let ips = if host_network(pod) {
        inputs.host_ips.to_vec()
    } else {
        match runtime.ready_sandbox().map(|s| pod_ips(&s.ips)) {
            Some(ips) if !ips.is_empty() => ips,
            _ => inputs.known_pod_ips.to_vec(),
        }
    };
    PodStatus {
        phase: Some(phase.to_owned()),
        reason: inputs.evicted.map(|(reason, _)| reason.to_owned()),
        message: inputs.evicted.map(|(_, message)| message.to_owned()),
        conditions: Some(with_resize_condition(
            pod,
            inputs.resizing,
            conditions(
                pod,
                &init,
                &apps,
                phase,
                sandbox_ready,
                inputs.evicted.filter(|_| inputs.disruption),
            ),
        )),
        host_ip: inputs.host_ips.first().cloned(),
        host_ips: (!inputs.host_ips.is_empty()).then(|| {
            inputs
                .host_ips
                .iter()
                .map(|ip| HostIP { ip: ip.clone() })
                .collect()
        }),
        pod_ip: ips.first().cloned(),
        pod_ips: (!ips.is_empty()).then(|| ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect()),
        start_time: inputs.start_time.map(Time),
        qos_class: Some(qos_class(pod).to_owned()),
        init_container_statuses: has_init.then_some(init),
        container_statuses: Some(apps),
        ephemeral_container_statuses: (!ephemeral.is_empty()).then_some(ephemeral),
        ..PodStatus::default()
    }
}

/// The addresses a status reports, to remember once the sandbox is gone.
pub fn reported_ips(status: &PodStatus) -> Vec<String> {
    status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use nodepulse_actors::ports::{Labels, SandboxMetadata, SandboxState, SandboxStatus};

    fn pod(policy: &str, names: &[&str]) -> Pod {
        let containers: Vec<_> = names
            .iter()
            .map(|n| json!({"name": n, "image": "busybox:1"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"restartPolicy": policy, "containers": containers},
        }))
        .unwrap()
    }

    fn container(
        name: &str,
        state: ContainerState,
        exit_code: i32,
        created_at: i64,
    ) -> ContainerStatus {
        ContainerStatus {
            id: format!("{name}-{created_at}"),
            name: name.to_owned(),
            attempt: 0,
            state,
            created_at,
            started_at: 1_000_000_000,
            finished_at: if state == ContainerState::Exited {
                2_000_000_000
            } else {
                0
            },
            exit_code,
            image: "busybox:1".to_owned(),
            image_ref: "sha256:b".to_owned(),
            reason: String::new(),
            message: String::new(),
            labels: Labels::new(),
            annotations: Labels::new(),
            log_path: "x".into(),
            mounts: Vec::new(),
            resources: None,
        }
    }

    fn runtime(containers: Vec<ContainerStatus>) -> PodRuntime {
        let sandbox = SandboxStatus {
            id: "s".to_owned(),
            metadata: SandboxMetadata::default(),
            state: SandboxState::Ready,
            created_at: 1,
            ips: vec![
                "10.0.0.2".to_owned(),
                "fd00::2".to_owned(),
                "10.0.0.3".to_owned(),
            ],
            labels: Labels::new(),
            annotations: Labels::new(),
        };
        PodRuntime::new(vec![sandbox], containers)
    }

    fn status(pod: &Pod, runtime: &PodRuntime) -> PodStatus {
        pod_status(
            pod,
            runtime,
            &StatusInputs {
                runtime_name: "containerd",
                ..StatusInputs::default()
            },
        )
    }

    #[test]
    fn ephemeral_containers_are_reported_never_ready_and_leave_the_phase_alone() {
        let mut pod = pod("Always", &["app"]);
        pod.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
            serde_json::from_value(json!({"name": "debugger", "image": "busybox:1"})).unwrap(),
            serde_json::from_value(json!({"name": "later", "image": "busybox:1"})).unwrap(),
        ]);
        let runtime = runtime(vec![
            container("app", ContainerState::Running, 0, 2),
            container("debugger", ContainerState::Exited, 3, 3),
        ]);
        let status = status(&pod, &runtime);
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let ephemeral = status.ephemeral_container_statuses.unwrap();
        let debugger = &ephemeral[0];
        assert_eq!(
            (debugger.ready, debugger.started, debugger.restart_count),
            (false, None, 0)
        );
        let terminated = debugger.state.as_ref().and_then(|s| s.terminated.as_ref());
        assert_eq!(terminated.map(|t| t.exit_code), Some(3));
        let waiting = ephemeral[1].state.as_ref().and_then(|s| s.waiting.as_ref());
        assert_eq!(
            waiting.and_then(|w| w.reason.as_deref()),
            Some("ContainerCreating")
        );
    }

    #[test]
    fn the_phase_follows_the_kubelets_rules_for_each_restart_policy() {
        use ContainerState::{Exited, Running};
        let cases: [(&str, Vec<ContainerStatus>, &str); 7] = [
            ("Always", vec![], "Pending"),
            ("Always", vec![container("a", Running, 0, 2)], "Running"),
            ("Always", vec![container("a", Exited, 1, 2)], "Running"),
            ("OnFailure", vec![container("a", Exited, 0, 2)], "Succeeded"),
            ("OnFailure", vec![container("a", Exited, 1, 2)], "Running"),
            ("Never", vec![container("a", Exited, 1, 2)], "Failed"),
            ("Never", vec![container("a", Exited, 0, 2)], "Succeeded"),
        ];
        for (policy, containers, expected) in cases {
            let got = status(&pod(policy, &["a"]), &runtime(containers.clone()));
            assert_eq!(
                got.phase.as_deref(),
                Some(expected),
                "{policy} {containers:?}"
            );
        }
    }

    /// ContainerRestartRules: a container's own `restartPolicy` and `restartPolicyRules` decide
    /// before the pod's policy whether it runs again, and so whether the pod is done.
    #[test]
    fn a_containers_own_restart_policy_and_rules_decide_the_phase() {
        use ContainerState::Exited;
        let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
        let cases = [
            ("Always", json!({"restartPolicy": "Never"}), 1, "Failed"),
            ("Always", json!({"restartPolicy": "Never"}), 0, "Succeeded"),
            ("Never", json!({"restartPolicy": "Always"}), 1, "Running"),
            (
                "Never",
                json!({"restartPolicy": "OnFailure"}),
                0,
                "Succeeded",
            ),
            (
                "Never",
                json!({"restartPolicy": "Never", "restartPolicyRules": rules}),
                42,
                "Running",
            ),
            (
                "Never",
                json!({"restartPolicy": "Never", "restartPolicyRules": rules}),
                1,
                "Failed",
            ),
        ];
        for (policy, own, exit_code, expected) in cases {
            let mut container_json = json!({"name": "a", "image": "busybox:1"});
            container_json
                .as_object_mut()
                .unwrap()
                .extend(own.as_object().unwrap().clone());
            let mut pod = pod(policy, &[]);
            pod.spec.as_mut().unwrap().containers =
                vec![serde_json::from_value(container_json).unwrap()];
            let got = status(&pod, &runtime(vec![container("a", Exited, exit_code, 2)]));
            assert_eq!(
                got.phase.as_deref(),
                Some(expected),
                "{policy} {own} exit {exit_code}"
            );
        }
    }

    #[test]
    fn the_newest_instance_is_the_state_and_the_one_before_the_last_state() {
        let runtime = runtime(vec![
            container("a", ContainerState::Exited, 2, 2),
            container("a", ContainerState::Running, 0, 3),
        ]);
        let status = status(&pod("Always", &["a"]), &runtime);
        let a = &status.container_statuses.unwrap()[0];
        assert_eq!(a.container_id.as_deref(), Some("containerd://a-3"));
        assert!(a.state.as_ref().unwrap().running.is_some());
        let last = a.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (last.exit_code, last.container_id.as_deref()),
            (2, Some("containerd://a-2"))
        );
        assert_eq!(status.pod_ips.unwrap().len(), 2, "one address per family");
    }

    #[test]
    fn unready_containers_are_named_in_the_ready_conditions_sorted_by_name() {
        let runtime = runtime(vec![container("b", ContainerState::Running, 0, 2)]);
        let status = status(&pod("Always", &["c", "b", "a"]), &runtime);
        let names: Vec<String> = status
            .container_statuses
            .clone()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [a c]")
        );
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    }

    #[test]
    fn a_failed_start_shows_as_waiting_and_moves_the_last_run_to_last_state() {
        let runtime = runtime(vec![container("a", ContainerState::Exited, 1, 2)]);
        let errors = [(
            "a".to_owned(),
            StartError {
                reason: "CrashLoopBackOff".to_owned(),
                message: "back-off 10s".to_owned(),
            },
        )]
        .into();
        let status = pod_status(
            &pod("Always", &["a"]),
            &runtime,
            &StatusInputs {
                runtime_name: "containerd",
                errors: Some(&errors),
                ..StatusInputs::default()
            },
        );
        let a = &status.container_statuses.unwrap()[0];
        let waiting = a.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(
            a.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn a_resize_not_yet_applied_shows_pod_resize_in_progress_first() {
        let pod = pod("Always", &["app"]);
        let runtime = runtime(vec![container("app", ContainerState::Running, 0, 1)]);
        let inputs = StatusInputs {
            resizing: true,
            ..StatusInputs::default()
        };
        let conditions = pod_status(&pod, &runtime, &inputs).conditions.unwrap();
        assert_eq!(conditions[0].type_, "PodResizeInProgress");
        assert_eq!(conditions[0].status, "True");
        let settled = pod_status(&pod, &runtime, &StatusInputs::default());
        assert!(
            settled
                .conditions
                .unwrap()
                .iter()
                .all(|c| c.type_ != "PodResizeInProgress")
        );
    }
}
