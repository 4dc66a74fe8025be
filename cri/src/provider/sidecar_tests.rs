//! Sidecars (restartable init containers) under the CRI provider, against the in-memory
//! runtime on paused time: started in order without being waited on, restarted when they
//! exit, stopped after the app containers, and no obstacle to a `Never` pod succeeding; plus
//! the pure plan and status rules they follow (and the status's share of termination messages,
//! an ephemeral container's single start).

use serde_json::json;

use super::{
    plan::{Kind, plan, plan_with},
    status::{StatusInputs, pod_status},
    tests::{Harness, IMAGE, app, condition, deleted, phase, pod},
    view::PodRuntime,
};
use nodepulse_actors::ports::{
    ContainerState, ContainerStatus, Labels, SandboxMetadata, SandboxState, SandboxStatus,
};

fn sidecar(name: &str) -> serde_json::Value {
    json!({"name": name, "image": IMAGE, "restartPolicy": "Always"})
}

#[tokio::test(start_paused = true)]
async fn a_sidecar_starts_first_keeps_running_beside_the_app_and_is_restarted_when_it_exits() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"initContainers": [sidecar("proxy"), {"name": "setup", "image": IMAGE}]}),
    ));
    let status = harness
        .status_where("setup runs beside the started sidecar", |s| {
            s["initContainerStatuses"][1]["state"]["running"].is_object()
        })
        .await;
    let proxy = &status["initContainerStatuses"][0];
    assert!(proxy["state"]["running"].is_object(), "{status}");
    assert_eq!(
        (&proxy["started"], &proxy["ready"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(phase(&status), "Pending");
    assert_eq!(
        condition(&status, "Initialized")["message"],
        "containers with incomplete status: [setup]"
    );
    assert!(harness.runtime.created("app").is_empty());

    harness.runtime.exit("setup", 0);
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert_eq!(condition(&status, "Initialized")["status"], "True");
    assert!(status["initContainerStatuses"][0]["state"]["running"].is_object());

    harness.runtime.exit("proxy", 1);
    let status = harness
        .status_where("the sidecar runs again", |s| {
            let proxy = &s["initContainerStatuses"][0];
            proxy["restartCount"] == 1 && proxy["state"]["running"].is_object()
        })
        .await;
    assert_eq!(
        status["initContainerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    assert_eq!(phase(&status), "Running");
    assert_eq!(harness.runtime.created("proxy").len(), 2);
    assert_eq!(harness.runtime.created("setup").len(), 1, "setup ran once");
    assert_eq!(
        harness.runtime.created("app").len(),
        1,
        "the app kept running"
    );
}

#[tokio::test(start_paused = true)]
async fn a_never_pod_succeeds_when_its_app_exits_zero_and_its_running_sidecar_is_stopped() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({"initContainers": [sidecar("proxy")]})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.exit("app", 0);
    let status = harness
        .status_where("Succeeded", |s| phase(s) == "Succeeded")
        .await;
    assert_eq!(app(&status)["state"]["terminated"]["exitCode"], 0);
    harness.wait_terminated().await;
    assert_eq!(harness.runtime.states("proxy"), [ContainerState::Exited]);
    assert_eq!(harness.runtime.created("proxy").len(), 1, "not restarted");
    let proxy = harness.runtime.ids("proxy").remove(0);
    assert!(
        harness
            .runtime
            .calls()
            .iter()
            .any(|c| c.starts_with(&format!("StopContainer {proxy} "))),
        "{:?}",
        harness.runtime.calls()
    );
}

#[tokio::test(start_paused = true)]
async fn deletion_stops_the_app_first_then_the_sidecars_last_declared_first() {
    let mut harness = Harness::new();
    // The app's preStop hook takes 5 s: the sidecars wait for it, though their own stops
    // could go at once.
    let running = pod(
        "Always",
        json!({"initContainers": [sidecar("first"), sidecar("second")],
               "containers": [{"name": "app", "image": IMAGE,
                   "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}]}),
    );
    harness.apply(&running);
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness
        .runtime
        .exec_takes(std::time::Duration::from_secs(5));
    let id = |name: &str| harness.runtime.ids(name).remove(0);
    let expected = [id("app"), id("second"), id("first")];
    harness.apply(&deleted(&running, 30));
    harness.wait_terminated().await;
    let order: Vec<String> = harness
        .runtime
        .calls()
        .into_iter()
        .filter_map(|c| c.strip_prefix("StopContainer ").map(str::to_owned))
        .collect();
    let ids: Vec<&str> = order.iter().filter_map(|c| c.split(' ').next()).collect();
    assert_eq!(ids, expected);
    // The sidecars' grace is what is left once the app stopped: 30 s less the hook's 5.
    assert!(
        order[1].ends_with(" 25s") || order[1].ends_with(" 24s"),
        "{order:?}"
    );
}

pub(super) fn instance(
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
        finished_at: 0,
        exit_code,
        image: IMAGE.to_owned(),
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

pub(super) fn runtime(containers: Vec<ContainerStatus>) -> PodRuntime {
    let sandbox = SandboxStatus {
        id: "s".to_owned(),
        metadata: SandboxMetadata::default(),
        state: SandboxState::Ready,
        created_at: 1,
        ips: vec!["10.0.0.2".to_owned()],
        labels: Labels::new(),
        annotations: Labels::new(),
    };
    PodRuntime::new(vec![sandbox], containers)
}

fn init(kind: &str) -> Vec<(Kind, String)> {
    vec![(Kind::Init, kind.to_owned())]
}

#[test]
fn the_plan_starts_the_init_container_after_a_sidecar_only_once_the_sidecar_runs() {
    let spec = pod(
        "Always",
        json!({"initContainers": [sidecar("proxy"), {"name": "setup", "image": IMAGE}]}),
    );
    let created = runtime(vec![instance("proxy", ContainerState::Created, 0, 2)]);
    assert_eq!(plan(&spec, &created).start, init("proxy"));
    let running = runtime(vec![instance("proxy", ContainerState::Running, 0, 2)]);
    assert_eq!(plan(&spec, &running).start, init("setup"));
}

#[test]
fn a_sidecar_holds_the_next_container_back_until_its_startup_probe_succeeded() {
    let spec = pod(
        "Always",
        json!({"initContainers": [sidecar("proxy"), {"name": "setup", "image": IMAGE}]}),
    );
    let running = runtime(vec![instance("proxy", ContainerState::Running, 0, 2)]);
    let not_started = plan_with(&spec, &running, &|_, _| false);
    assert!(not_started.start.is_empty(), "{not_started:?}");
    let started = plan_with(&spec, &running, &|_, _| true);
    assert_eq!(started.start, init("setup"));
}

#[test]
fn the_plan_restarts_an_exited_sidecar_beside_the_app_but_not_once_the_app_is_done() {
    let spec = pod("OnFailure", json!({"initContainers": [sidecar("proxy")]}));
    let crashed = runtime(vec![
        instance("proxy", ContainerState::Exited, 1, 2),
        instance("app", ContainerState::Running, 0, 3),
    ]);
    let restart = plan(&spec, &crashed);
    assert_eq!(restart.start, init("proxy"));
    assert!(!restart.kill_pod);

    let done = runtime(vec![
        instance("proxy", ContainerState::Exited, 1, 2),
        instance("app", ContainerState::Exited, 0, 3),
    ]);
    let finish = plan(&spec, &done);
    assert!(finish.start.is_empty(), "{finish:?}");
    assert!(finish.kill_pod, "the pod is done: its sidecars are stopped");
}

#[test]
fn sidecars_hold_a_pod_pending_until_started_and_are_listed_first_when_unready() {
    let spec = pod(
        "Never",
        json!({"initContainers": [sidecar("proxy")],
               "containers": [{"name": "app", "image": IMAGE}]}),
    );
    let inputs = StatusInputs {
        runtime_name: "containerd",
        ..StatusInputs::default()
    };
    let waiting = pod_status(&spec, &runtime(vec![]), &inputs);
    assert_eq!(waiting.phase.as_deref(), Some("Pending"));
    let conditions = waiting.conditions.unwrap();
    let ready = conditions.iter().find(|c| c.type_ == "ContainersReady");
    assert_eq!(
        ready.and_then(|c| c.message.as_deref()),
        Some("containers with unready status: [proxy app]")
    );

    // A running sidecar counts as running (getPhase): the app is done, the pod is not yet.
    let app_done = runtime(vec![
        instance("proxy", ContainerState::Running, 0, 2),
        instance("app", ContainerState::Exited, 0, 3),
    ]);
    let status = pod_status(&spec, &app_done, &inputs);
    assert_eq!(status.phase.as_deref(), Some("Running"));
    // Once the provider stopped it, the terminated sidecar is ignored.
    let succeeded = runtime(vec![
        instance("proxy", ContainerState::Exited, 0, 2),
        instance("app", ContainerState::Exited, 0, 3),
    ]);
    let status = pod_status(&spec, &succeeded, &inputs);
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
}

#[test]
fn a_pods_containers_share_12_kib_of_termination_messages() {
    let spec = pod(
        "Always",
        json!({"containers": [{"name": "a", "image": IMAGE}, {"name": "b", "image": IMAGE},
                              {"name": "c", "image": IMAGE}]}),
    );
    let mut long = instance("a", ContainerState::Exited, 1, 2);
    long.message = "m".repeat(5000);
    let status = pod_status(
        &spec,
        &runtime(vec![long]),
        &StatusInputs {
            runtime_name: "containerd",
            ..StatusInputs::default()
        },
    );
    let a = &status.container_statuses.unwrap()[0];
    let message = a
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap()
        .message
        .clone();
    assert_eq!(message.map(|m| m.len()), Some(12 * 1024 / 3));
}

#[test]
fn the_plan_starts_an_ephemeral_container_once_even_before_the_init_containers_finish() {
    let mut spec = pod(
        "Always",
        json!({"initContainers": [{"name": "setup", "image": IMAGE}]}),
    );
    spec.spec.as_mut().unwrap().ephemeral_containers = Some(vec![
        serde_json::from_value(json!({"name": "debugger", "image": IMAGE})).unwrap(),
    ]);
    let initialising = runtime(vec![instance("setup", ContainerState::Running, 0, 2)]);
    assert_eq!(
        plan(&spec, &initialising).start,
        vec![(Kind::Ephemeral, "debugger".to_owned())]
    );
    let exited = runtime(vec![
        instance("setup", ContainerState::Exited, 0, 2),
        instance("app", ContainerState::Running, 0, 3),
        instance("debugger", ContainerState::Exited, 1, 4),
    ]);
    assert!(plan(&spec, &exited).start.is_empty(), "never restarted");
}
