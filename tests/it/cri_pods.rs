//! Real pods on containerd through a whole `runtime: cri` node, against an API server (the
//! emulator, or a real cluster): a bound pod runs, its container sees its env and hostname,
//! and the pod shows Running with the pod IP from CNI; exit 1 under `Always` reaches
//! CrashLoopBackOff; `OnFailure`/`Never` end Succeeded/Failed with the exit code; an init
//! container gates the app; a missing image under `Never` waits with ErrImageNeverPull;
//! deletion runs the preStop hook, then stops containers with SIGTERM, then SIGKILL after the
//! grace period; a daemon
//! SIGKILLed and restarted adopts its running pod without a second container, and so does a
//! pod actor killed while pods start.

use std::{net::Ipv4Addr, time::Duration};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::{
    Api,
    api::{DeleteParams, WatchEvent, WatchParams},
};
use nodepulse_actors::{
    pods,
    ports::{ContainerFilter, ContainerRuntime, ContainerState},
};
use nodepulse_supervisor::{ChildState, KillMode};
use nodepulse_testkit::{
    PATIENCE,
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::{CriNode, cri_node_config},
    daemon::DaemonProcess,
    eventually_async,
    oci_image::BUSYBOX_IMAGE,
    pods::{create, phase, pod_manifest, running_and_ready, wait_pod, wait_running},
};
use serde_json::{Value, json};

pub(crate) const NAMESPACE: &str = "default";

/// A shell that runs until SIGTERM, which ends it with 0; `/tmp/trapped` says its traps are
/// set (a signal that comes first finds PID 1 without a handler, and is ignored).
pub(crate) const UNTIL_TERM: &str =
    "trap 'exit 0' TERM; touch /tmp/trapped; while :; do sleep 3600 & wait $!; done";

/// Waits until the pod's container's shell has set its traps (see [`UNTIL_TERM`]).
async fn wait_trapped(fixture: &CriFixture, pod: &Pod) {
    wait_container_trapped(fixture, runtime_id(&app(pod))).await;
}

/// Waits until the shell of the runtime's container `id` has set its traps (see
/// [`UNTIL_TERM`]).
pub(crate) async fn wait_container_trapped(fixture: &CriFixture, id: String) {
    eventually_async("the container's shell set its traps", || {
        let check = fixture.client.exec_sync(
            id.clone(),
            vec!["test".into(), "-e".into(), "/tmp/trapped".into()],
            Duration::from_secs(10),
        );
        async move { check.await.is_ok_and(|output| output.exit_code == 0) }
    })
    .await;
}

pub(crate) fn shell(name: &str, script: &str) -> Value {
    json!({"name": name, "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", script]})
}

pub(crate) fn spec(restart_policy: &str, containers: Value) -> Value {
    json!({"spec": {"restartPolicy": restart_policy, "containers": containers}})
}

/// Creates pod `name` bound to `node`, with `extra` (its spec) merged into the manifest.
pub(crate) async fn create_pod(cluster: &TestCluster, node: &str, name: &str, extra: Value) -> Pod {
    create(&cluster.client, &pod_manifest(name, NAMESPACE, node, extra)).await
}

/// Waits until pod `name` is in phase `wanted`; the pod then.
pub(crate) async fn wait_phase(cluster: &TestCluster, name: &str, wanted: &str) -> Pod {
    wait_pod(&cluster.client, NAMESPACE, name, wanted, |p| {
        phase(p) == Some(wanted)
    })
    .await
}

pub(crate) fn app(pod: &Pod) -> ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|all| all.first().cloned())
        .unwrap_or_default()
}

fn waiting_reason(pod: &Pod) -> Option<String> {
    app(pod).state?.waiting?.reason
}

/// The containers the runtime holds for the pod, by the kubelet's label.
pub(crate) async fn runtime_containers(fixture: &CriFixture, pod: &Pod) -> Vec<String> {
    let uid = pod.metadata.uid.clone().expect("a uid");
    let filter = ContainerFilter {
        labels: [("io.kubernetes.pod.uid".to_owned(), uid)].into(),
        ..ContainerFilter::default()
    };
    let containers = fixture
        .client
        .list_containers(filter)
        .await
        .expect("ListContainers");
    containers.into_iter().map(|c| c.id).collect()
}

/// A CRI node on a private containerd against a test cluster; dropped in this order, so the
/// sandboxes go while containerd still runs.
pub(crate) struct Setup {
    pub(crate) node: CriNode,
    pub(crate) fixture: CriFixture,
    pub(crate) cluster: TestCluster,
}

impl Setup {
    /// `None` (skip) where containerd is missing, outside CI only.
    pub(crate) async fn start(test: &str, prefix: &str) -> Option<Self> {
        CriFixture::required(test)?;
        let cluster = TestCluster::start().await;
        let fixture = CriFixture::start(prefix).await;
        let node = CriNode::start(&cluster.kubeconfig, &fixture, prefix).await;
        Some(Self {
            node,
            fixture,
            cluster,
        })
    }
}

pub(crate) fn runtime_id(status: &ContainerStatus) -> String {
    let id = status.container_id.clone().expect("a container ID");
    id.strip_prefix("containerd://")
        .unwrap_or_else(|| panic!("{id} is not a containerd:// ID"))
        .to_owned()
}

/// Issue 29's storm with a real container: a CRI pod's status (image and container IDs, start
/// times, addresses, `lastState`) served back by the API server is what nodepulse sent, so
/// the settled pod costs no request in batch passes.
#[actix_rt::test]
async fn a_settled_cri_pod_costs_no_request_over_batch_passes() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "a_settled_cri_pod_costs_no_request_over_batch_passes",
        "cri-settled",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-idle", node.name);
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        nodepulse_testkit::settled::assert_settled(&cluster, &node.supervisor, &name).await;
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_runs_on_containerd_and_shows_running_with_its_cni_address() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "a_pod_runs_on_containerd_and_shows_running_with_its_cni_address",
        "cri-runs",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-web", node.name);
        let script = format!("echo $GREETING from $(hostname) > /tmp/out; {UNTIL_TERM}");
        let mut container = shell("app", &script);
        container["env"] = json!([{"name": "GREETING", "value": "hello"}]);
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([container])),
        )
        .await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Running and Ready",
            running_and_ready,
        )
        .await;

        let status = pod.status.clone().expect("a status");
        let ip: Ipv4Addr = status
            .pod_ip
            .as_deref()
            .expect("a pod IP")
            .parse()
            .expect("IPv4");
        assert_eq!(
            ip.octets()[..3],
            [198, 18, 1],
            "{ip} is not from the CNI range"
        );
        assert!(status.host_ip.is_some(), "hostIP is reported");
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        let container = app(&pod);
        assert!(container.ready && container.started == Some(true));
        assert!(
            container.image_id.starts_with("sha256:"),
            "imageID {}",
            container.image_id
        );
        let output = fixture
            .client
            .exec_sync(
                runtime_id(&container),
                vec!["cat".into(), "/tmp/out".into()],
                Duration::from_secs(10),
            )
            .await
            .expect("ExecSync");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!("hello from {name}\n")
        );
        assert_eq!(runtime_containers(&fixture, &pod).await.len(), 1);
    })
    .await;
}

#[actix_rt::test]
async fn a_container_exiting_1_under_always_reaches_crash_loop_back_off() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "a_container_exiting_1_under_always_reaches_crash_loop_back_off",
        "cri-crash",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-crash", node.name);
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([shell("app", "exit 1")])),
        )
        .await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "CrashLoopBackOff",
            |pod| waiting_reason(pod).as_deref() == Some("CrashLoopBackOff"),
        )
        .await;
        let container = app(&pod);
        assert!(
            container.restart_count >= 1,
            "restartCount {}",
            container.restart_count
        );
        let message = container
            .state
            .and_then(|s| s.waiting)
            .and_then(|w| w.message)
            .unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        assert!(message.starts_with("back-off "), "{message}");
        assert!(
            message.ends_with(&format!(
                " restarting failed container=app pod={name}_{NAMESPACE}({uid})"
            )),
            "{message}"
        );
        let last = container
            .last_state
            .and_then(|s| s.terminated)
            .expect("the last run's end");
        assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
        assert_eq!(
            phase(&pod),
            Some("Running"),
            "a crash-looping pod stays Running"
        );
        assert!(
            runtime_containers(&fixture, &pod).await.len() <= 2,
            "one dead container is kept, no more"
        );
    })
    .await;
}

#[actix_rt::test]
async fn on_failure_and_never_pods_end_succeeded_and_failed_with_the_exit_code() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "on_failure_and_never_pods_end_succeeded_and_failed_with_the_exit_code",
        "cri-phases",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let done = format!("{}-done", node.name);
        let failed = format!("{}-failed", node.name);
        create_pod(
            &cluster,
            &node.name,
            &done,
            spec("OnFailure", json!([shell("app", "exit 0")])),
        )
        .await;
        create_pod(
            &cluster,
            &node.name,
            &failed,
            spec("Never", json!([shell("app", "exit 3")])),
        )
        .await;
        let pod = wait_phase(&cluster, &done, "Succeeded").await;
        let end = app(&pod)
            .state
            .and_then(|s| s.terminated)
            .expect("terminated");
        assert_eq!(
            (end.exit_code, end.reason.as_deref()),
            (0, Some("Completed"))
        );
        assert_eq!(app(&pod).restart_count, 0);
        let pod = wait_phase(&cluster, &failed, "Failed").await;
        let end = app(&pod)
            .state
            .and_then(|s| s.terminated)
            .expect("terminated");
        assert_eq!((end.exit_code, end.reason.as_deref()), (3, Some("Error")));
        assert_eq!(
            runtime_containers(&fixture, &pod).await.len(),
            1,
            "Never: no restart"
        );
    })
    .await;
}

#[actix_rt::test]
async fn an_init_container_runs_to_completion_before_the_app_starts() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "an_init_container_runs_to_completion_before_the_app_starts",
        "cri-init",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-gated", node.name);
        let mut manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
        manifest["spec"]["initContainers"] = json!([shell("setup", "sleep 1")]);
        create_pod(&cluster, &node.name, &name, manifest).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
        let status = pod.status.clone().expect("a status");
        let init = status.init_container_statuses.expect("init statuses")[0].clone();
        let done = init
            .state
            .and_then(|s| s.terminated)
            .expect("the init container ended");
        assert_eq!(
            (done.exit_code, done.reason.as_deref()),
            (0, Some("Completed"))
        );
        let app_started = app(&pod)
            .state
            .and_then(|s| s.running)
            .and_then(|r| r.started_at)
            .expect("started");
        assert!(
            app_started.0 >= done.finished_at.expect("finishedAt").0,
            "the app started after the init container ended"
        );

        let blocked = format!("{}-blocked", node.name);
        let mut manifest = spec("Never", json!([shell("app", UNTIL_TERM)]));
        manifest["spec"]["initContainers"] = json!([shell("setup", "exit 1")]);
        create_pod(&cluster, &node.name, &blocked, manifest).await;
        let pod = wait_phase(&cluster, &blocked, "Failed").await;
        assert_eq!(
            runtime_containers(&fixture, &pod).await.len(),
            1,
            "the app never ran"
        );
        assert_eq!(waiting_reason(&pod).as_deref(), Some("PodInitializing"));
    })
    .await;
}

#[actix_rt::test]
async fn a_missing_image_under_never_waits_with_err_image_never_pull() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "a_missing_image_under_never_waits_with_err_image_never_pull",
        "cri-never",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-missing", node.name);
        let container = json!({"name": "app", "image": "nodepulse.test/missing:1", "imagePullPolicy": "Never"});
        create_pod(&cluster, &node.name, &name, spec("Always", json!([container]))).await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "ErrImageNeverPull", |pod| {
            waiting_reason(pod).as_deref() == Some("ErrImageNeverPull")
        })
        .await;
        let message = app(&pod).state.and_then(|s| s.waiting).and_then(|w| w.message);
        assert_eq!(
            message.as_deref(),
            Some("Container image \"nodepulse.test/missing:1\" is not present with pull policy of Never")
        );
        assert_eq!(phase(&pod), Some("Pending"));
    })
    .await;
}

/// Deletes `name` with `grace` seconds and returns the pod as it was when the API removed it.
pub(crate) async fn delete_and_wait_gone(api: &Api<Pod>, name: &str, grace: u32) -> Pod {
    let current = api.get(name).await.expect("the pod");
    let version = current
        .metadata
        .resource_version
        .clone()
        .expect("a version");
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut watch = api.watch(&params, &version).await.expect("a watch").boxed();
    let delete = DeleteParams {
        grace_period_seconds: Some(grace),
        ..DeleteParams::default()
    };
    api.delete(name, &delete).await.expect("delete accepted");
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = watch.try_next().await.expect("watch") {
            if let WatchEvent::Deleted(pod) = event {
                return pod;
            }
        }
        panic!("the watch ended before {name} was deleted");
    })
    .await
    .unwrap_or_else(|_| panic!("{name} was not deleted within {PATIENCE:?}"))
}

#[actix_rt::test]
async fn deletion_runs_pre_stop_then_sigterm_then_sigkill_after_the_grace_period() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "deletion_runs_pre_stop_then_sigterm_then_sigkill_after_the_grace_period",
        "cri-delete",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let polite = format!("{}-polite", node.name);
        let stubborn = format!("{}-stubborn", node.name);
        create_pod(
            &cluster,
            &node.name,
            &polite,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        let ignores = "trap '' TERM; touch /tmp/trapped; while :; do sleep 1; done";
        create_pod(
            &cluster,
            &node.name,
            &stubborn,
            spec("Always", json!([shell("app", ignores)])),
        )
        .await;
        // The preStop hook signals the shell, which then ends with 3 before any SIGTERM.
        let hooked = format!("{}-hooked", node.name);
        let mut container = shell("app", &format!("trap 'exit 3' USR1; {UNTIL_TERM}"));
        container["lifecycle"] = json!({"preStop": {"exec": {"command": ["kill", "-USR1", "1"]}}});
        create_pod(
            &cluster,
            &node.name,
            &hooked,
            spec("Always", json!([container])),
        )
        .await;
        for name in [&polite, &stubborn, &hooked] {
            let pod = wait_pod(
                &cluster.client,
                NAMESPACE,
                name,
                "Running and Ready",
                running_and_ready,
            )
            .await;
            wait_trapped(&fixture, &pod).await;
        }
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        let (polite_end, stubborn_end, hooked_end) = futures::join!(
            delete_and_wait_gone(&api, &polite, 3),
            delete_and_wait_gone(&api, &stubborn, 3),
            delete_and_wait_gone(&api, &hooked, 3)
        );
        let end = |pod: &Pod| {
            app(pod)
                .state
                .and_then(|s| s.terminated)
                .expect("terminated")
        };
        assert_eq!(
            end(&polite_end).exit_code,
            0,
            "SIGTERM, trapped: a clean exit"
        );
        assert_eq!(
            end(&stubborn_end).exit_code,
            137,
            "SIGTERM ignored: SIGKILL after the grace period"
        );
        assert_eq!(
            end(&hooked_end).exit_code,
            3,
            "the preStop hook ran before SIGTERM"
        );
        for pod in [&polite_end, &stubborn_end, &hooked_end] {
            assert!(
                runtime_containers(&fixture, pod).await.is_empty(),
                "the sandbox is removed"
            );
        }
    })
    .await;
}

/// The first value under `key` anywhere in `value`.
pub(crate) fn find_key<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|inner| find_key(inner, key))),
        Value::Array(items) => items.iter().find_map(|inner| find_key(inner, key)),
        _ => None,
    }
}

/// The first number under key `relists` anywhere in `value`.
pub(crate) fn relists(value: &Value) -> Option<u64> {
    find_key(value, "relists").and_then(Value::as_u64)
}

#[actix_rt::test]
async fn a_daemon_killed_and_restarted_adopts_its_running_pod_without_a_second_container() {
    let Some(()) = CriFixture::required(
        "a_daemon_killed_and_restarted_adopts_its_running_pod_without_a_second_container",
    ) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cri-restart").await;
    let dir = nodepulse_testkit::root_dir::RootDir::new();
    let node = nodepulse_testkit::cluster::unique_node_name("cri-restart");
    let yaml = cri_node_config(&fixture, dir.path());
    let mut daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let name = format!("{node}-adopted");
    create(
        &cluster.client,
        &pod_manifest(
            &name,
            NAMESPACE,
            &node,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        ),
    )
    .await;
    let before = wait_pod(
        &cluster.client,
        NAMESPACE,
        &name,
        "Running and Ready",
        running_and_ready,
    )
    .await;
    let first = app(&before);

    daemon.signal("KILL");
    assert!(
        daemon.wait_exit(PATIENCE).await.is_some(),
        "the daemon ended"
    );
    drop(daemon);
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    eventually_async(
        "the restarted daemon relisted the runtime a few times",
        || async { relists(&daemon.actor("pod-lifecycle").await).is_some_and(|count| count >= 3) },
    )
    .await;
    assert_eq!(
        runtime_containers(&fixture, &before).await,
        [runtime_id(&first)],
        "no container is started twice"
    );
    let pod: Pod = Api::namespaced(cluster.client.clone(), NAMESPACE)
        .get(&name)
        .await
        .expect("the pod");
    assert!(running_and_ready(&pod));
    assert_eq!(app(&pod).container_id, first.container_id);
    let start = |pod: &Pod| pod.status.as_ref().and_then(|s| s.start_time.clone());
    assert_eq!(start(&pod), start(&before), "startTime is kept");

    // Statuses continue: the container ends (SIGTERM to its shell) and the new daemon
    // restarts it, counting from the restart count the runtime keeps.
    wait_trapped(&fixture, &pod).await;
    fixture
        .client
        .exec_sync(
            runtime_id(&first),
            vec!["kill".into(), "1".into()],
            Duration::from_secs(10),
        )
        .await
        .expect("ExecSync");
    let after = wait_pod(&cluster.client, NAMESPACE, &name, "restarted once", |pod| {
        app(pod).restart_count == 1 && running_and_ready(pod)
    })
    .await;
    let last = app(&after)
        .last_state
        .and_then(|s| s.terminated)
        .expect("lastState");
    assert_eq!(
        (last.exit_code, last.container_id),
        (0, first.container_id.clone())
    );
    let states = fixture
        .client
        .list_containers(ContainerFilter {
            state: Some(ContainerState::Running),
            labels: [(
                "io.kubernetes.pod.uid".to_owned(),
                before.metadata.uid.clone().unwrap_or_default(),
            )]
            .into(),
            ..ContainerFilter::default()
        })
        .await
        .expect("ListContainers");
    assert_eq!(states.len(), 1, "one running container");
    drop(daemon);
}

#[actix_rt::test]
async fn killing_the_pod_actor_while_pods_start_starts_no_container_twice() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "killing_the_pod_actor_while_pods_start_starts_no_container_twice",
        "cri-kill",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let names: Vec<String> = (0..3).map(|i| format!("{}-{i}", node.name)).collect();
        for name in &names {
            let manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
            create_pod(&cluster, &node.name, name, manifest).await;
        }
        for mode in [KillMode::Hang, KillMode::Panic] {
            let before = node
                .supervisor
                .actor(pods::NAME)
                .expect("the actor")
                .restarts;
            node.supervisor
                .kill(pods::NAME, mode)
                .await
                .expect("the kill is accepted");
            nodepulse_testkit::eventually("the pod actor runs again", || {
                node.supervisor.actor(pods::NAME).is_some_and(|actor| {
                    actor.restarts > before && actor.state == ChildState::Running
                })
            })
            .await;
        }
        let mut first = None;
        for name in &names {
            let pod = wait_pod(
                &cluster.client,
                NAMESPACE,
                name,
                "Running and Ready",
                running_and_ready,
            )
            .await;
            assert_eq!(
                runtime_containers(&fixture, &pod).await.len(),
                1,
                "{name}: one container"
            );
            first.get_or_insert(app(&pod));
        }
        // The restarted actor still hears from the provider: a container's end is reported.
        let first = first.expect("a pod");
        let first_pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &names[0],
            "Running",
            running_and_ready,
        )
        .await;
        wait_trapped(&fixture, &first_pod).await;
        fixture
            .client
            .exec_sync(
                runtime_id(&first),
                vec!["kill".into(), "1".into()],
                Duration::from_secs(10),
            )
            .await
            .expect("ExecSync");
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &names[0],
            "restarted once",
            |pod| app(pod).restart_count == 1 && running_and_ready(pod),
        )
        .await;
    })
    .await;
}
