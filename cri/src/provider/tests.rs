//! The CRI provider against the in-memory runtime, on paused time: what each rule of the
//! kubelet (sandbox and container config, status, restart policy and back-off, images, init
//! containers, termination, adoption after a restart, an idle PLEG) turns into.

use nodepulse_actors::kept_pod::KeptPod;
use std::{path::Path, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};

use super::{ClusterDns, CriPods, CriPodsSettings, RELIST_PERIOD};
use nodepulse_actors::{
    messages::StopPod,
    pods::{PodLifecycleProvider, PodUpdate},
    ports::{
        ContainerState, MountPropagation, PortMapping, Protocol,
        fakes::{container_runtime::FakeRuntime, paused_wall_clock},
    },
    volume_manager::PodVolumeView,
};

pub(super) const IMAGE: &str = "nodepulse.test/busybox:1";
const BUDGET: Duration = Duration::from_secs(600);

pub(super) struct Harness {
    pub(super) pods: CriPods,
    pub(super) runtime: Arc<FakeRuntime>,
    pub(super) updates: Vec<PodUpdate>,
    dir: tempfile::TempDir,
}

fn settings(dir: &Path) -> CriPodsSettings {
    std::fs::write(
        dir.join("resolv.conf"),
        "nameserver 1.1.1.1\nsearch example.org\n",
    )
    .unwrap();
    CriPodsSettings {
        host_ips: vec!["192.168.1.10".to_owned()],
        pod_logs_dir: dir.join("logs"),
        root_dir: dir.join("root"),
        cluster_dns: ClusterDns {
            servers: vec!["10.96.0.10".to_owned()],
            domain: "cluster.local".to_owned(),
        },
        resolv_conf: dir.join("resolv.conf"),
        node_hosts_file: dir.join("hosts"),
        allowed_unsafe_sysctls: Vec::new(),
        isolation: super::isolation::IsolationSettings::new(
            &dir.join("root"),
            false,
            &dir.join("sys"),
        ),
        apparmor: Err(nodepulse_actors::pods::apparmor::AppArmorDisabled),
        static_pods: false,
        memory_capacity: 8 << 30,
        relist_period: RELIST_PERIOD,
        relist_threshold: super::RELIST_THRESHOLD,
        sandboxes_at_once: super::default_sandboxes_at_once(),
        clock: paused_wall_clock(),
    }
}

impl Harness {
    pub(super) fn new() -> Self {
        Self::configured(|pods| pods)
    }

    /// A provider over a runtime holding [`IMAGE`], with what `configure` adds.
    pub(super) fn configured(configure: impl FnOnce(CriPods) -> CriPods) -> Self {
        let runtime = Arc::new(FakeRuntime::new(paused_wall_clock()).with_image(IMAGE));
        Self::over_configured(runtime, configure)
    }

    /// A provider (a new process's) over `runtime`.
    pub(super) fn over(runtime: Arc<FakeRuntime>) -> Self {
        Self::over_configured(runtime, |pods| pods)
    }

    /// A provider that asks `volumes` whether a pod's volumes are set up.
    pub(super) fn with_volume_view(volumes: Arc<dyn PodVolumeView>) -> Self {
        let runtime = Arc::new(FakeRuntime::new(paused_wall_clock()).with_image(IMAGE));
        Self::build(runtime, Some(volumes), |_| {}, |pods| pods)
    }

    fn over_configured(
        runtime: Arc<FakeRuntime>,
        configure: impl FnOnce(CriPods) -> CriPods,
    ) -> Self {
        Self::build(runtime, None, |_| {}, configure)
    }

    /// A provider over `runtime` whose settings `change` alters.
    pub(super) fn over_settings(
        runtime: Arc<FakeRuntime>,
        change: impl FnOnce(&mut CriPodsSettings),
    ) -> Self {
        Self::build(runtime, None, change, |pods| pods)
    }

    pub(super) fn build(
        runtime: Arc<FakeRuntime>,
        volumes: Option<Arc<dyn PodVolumeView>>,
        change: impl FnOnce(&mut CriPodsSettings),
        configure: impl FnOnce(CriPods) -> CriPods,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = settings(dir.path());
        change(&mut settings);
        let pods = configure(CriPods::new(
            settings,
            Arc::clone(&runtime) as _,
            volumes,
            tokio::runtime::Handle::current(),
        ));
        Self {
            pods,
            runtime,
            updates: Vec::new(),
            dir,
        }
    }

    pub(super) fn apply(&mut self, pod: &Pod) {
        let updates = self.pods.pod_applied(
            &KeptPod::from(pod.clone()),
            nodepulse_actors::clock::system()(),
        );
        self.updates.extend(updates);
    }

    /// Ticks until a status satisfies `check`; that status.
    pub(super) async fn status_where(
        &mut self,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let started = tokio::time::Instant::now();
        loop {
            self.updates
                .extend(self.pods.tick(nodepulse_actors::clock::system()()));
            let hit = self.updates.iter().rev().find_map(|u| match u {
                PodUpdate::Status { status, .. } => {
                    let value = serde_json::to_value(status).unwrap();
                    check(&value).then_some(value)
                }
                _ => None,
            });
            if let Some(status) = hit {
                return status;
            }
            assert!(started.elapsed() < BUDGET, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The Events asked for so far, as `<Normal|Warning> <reason>: <message>`.
    pub(super) fn events(&self) -> Vec<String> {
        self.updates
            .iter()
            .filter_map(|update| match update {
                PodUpdate::Event { event, .. } => Some(format!(
                    "{} {}: {}",
                    if event.warning { "Warning" } else { "Normal" },
                    event.reason,
                    event.message
                )),
                _ => None,
            })
            .collect()
    }

    pub(super) fn terminated(&mut self) -> usize {
        self.updates
            .extend(self.pods.tick(nodepulse_actors::clock::system()()));
        self.updates
            .iter()
            .filter(|u| matches!(u, PodUpdate::Terminated { .. }))
            .count()
    }

    /// Ticks until TerminatePod was asked for, and checks it was asked for once.
    pub(super) async fn wait_terminated(&mut self) {
        let started = tokio::time::Instant::now();
        while self.terminated() == 0 {
            assert!(
                started.elapsed() < BUDGET,
                "timed out waiting for TerminatePod"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(self.terminated(), 1, "TerminatePod once");
    }
}

pub(super) fn pod(restart_policy: &str, spec: Value) -> Pod {
    let mut manifest = json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                     "labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {"nodeName": "worker-1", "restartPolicy": restart_policy,
                 "containers": [{"name": "app", "image": IMAGE}]},
    });
    for (key, value) in spec.as_object().unwrap() {
        manifest["spec"][key] = value.clone();
    }
    serde_json::from_value(manifest).unwrap()
}

pub(super) fn phase(status: &Value) -> &str {
    status["phase"].as_str().unwrap_or_default()
}

pub(super) fn app(status: &Value) -> &Value {
    &status["containerStatuses"][0]
}

pub(super) fn waiting_reason(status: &Value) -> &str {
    app(status)["state"]["waiting"]["reason"]
        .as_str()
        .unwrap_or_default()
}

/// The app container's waiting message.
pub(super) fn waiting_message(status: &Value) -> String {
    app(status)["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(super) fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

#[tokio::test(start_paused = true)]
async fn a_bound_pod_runs_in_a_sandbox_with_the_kubelets_config_and_reports_running() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"containers": [{
            "name": "app", "image": IMAGE, "command": ["/bin/sh"], "args": ["-c", "sleep 1000"],
            "workingDir": "/w", "env": [{"name": "X", "value": "1"}],
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                          "limits": {"cpu": "500m", "memory": "128Mi"}}}]}),
    ));
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;

    let sandbox = &harness.runtime.sandbox_configs()[0];
    assert_eq!(sandbox.hostname, "web");
    assert_eq!(
        sandbox.log_directory,
        harness.dir.path().join("logs/default_web_u1")
    );
    assert!(
        sandbox.log_directory.is_dir(),
        "the log directory is made first"
    );
    for (key, value) in [
        ("io.kubernetes.pod.name", "web"),
        ("io.kubernetes.pod.namespace", "default"),
        ("io.kubernetes.pod.uid", "u1"),
        ("app", "web"),
    ] {
        assert_eq!(
            sandbox.labels.get(key).map(String::as_str),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(
        sandbox.annotations.get("team").map(String::as_str),
        Some("a")
    );
    let dns = sandbox.dns.clone().unwrap();
    assert_eq!(dns.servers, ["10.96.0.10"]);
    assert_eq!(
        dns.searches,
        [
            "default.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
            "example.org"
        ]
    );
    assert_eq!(dns.options, ["ndots:5"]);
    assert_eq!(
        sandbox.port_mappings,
        [PortMapping {
            protocol: Protocol::Tcp,
            container_port: 80,
            host_port: 8080,
            host_ip: String::new()
        }]
    );

    let config = &harness.runtime.created("app")[0];
    assert_eq!(config.command, ["/bin/sh"]);
    assert_eq!(config.args, ["-c", "sleep 1000"]);
    assert_eq!(config.working_dir, "/w");
    assert_eq!(config.envs, [("X".to_owned(), "1".to_owned())]);
    assert_eq!(config.image, format!("sha256:{IMAGE}"));
    assert_eq!(config.log_path, Path::new("app/0.log"));
    assert_eq!(
        config.annotations["io.kubernetes.container.restartCount"],
        "0"
    );
    assert_eq!(config.labels["io.kubernetes.container.name"], "app");
    let resources = config.resources.clone().unwrap();
    assert_eq!(
        (
            resources.cpu_shares,
            resources.cpu_quota,
            resources.cpu_period
        ),
        (256, 50_000, 100_000)
    );
    assert_eq!(resources.memory_limit_in_bytes, 128 << 20);
    // Burstable: 1000 - 1000 × 64Mi / 8Gi.
    assert_eq!(resources.oom_score_adj, 993);
    let message = config
        .mounts
        .iter()
        .find(|m| m.container_path == Path::new("/dev/termination-log"))
        .expect("the termination message file is mounted");
    assert!(
        message
            .host_path
            .starts_with(harness.dir.path().join("root/pods/u1/containers/app"))
    );
    assert!(message.host_path.is_file());
    assert_eq!(message.propagation, MountPropagation::Private);
    assert_eq!(
        harness.runtime.count("PullImage"),
        0,
        "IfNotPresent and present: no pull"
    );

    assert!(
        status["podIP"].as_str().unwrap().starts_with("10.0.0."),
        "the sandbox's IP"
    );
    assert_eq!(status["podIPs"], json!([{"ip": status["podIP"]}]));
    assert_eq!(status["hostIP"], "192.168.1.10");
    assert_eq!(status["qosClass"], "Burstable");
    assert!(status["startTime"].is_string());
    let container = app(&status);
    assert!(
        container["containerID"]
            .as_str()
            .unwrap()
            .starts_with("containerd://container-")
    );
    assert_eq!(container["imageID"], format!("sha256:{IMAGE}"));
    assert_eq!(
        (container["ready"].clone(), container["started"].clone()),
        (json!(true), json!(true))
    );
    assert!(container["state"]["running"]["startedAt"].is_string());
    let kinds: Vec<&str> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    assert!(
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "True")
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_that_never_restarts_ends_failed_with_the_exit_code_and_is_terminated() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.exit("app", 1);
    let status = harness
        .status_where("Failed", |s| phase(s) == "Failed")
        .await;
    let terminated = &app(&status)["state"]["terminated"];
    assert_eq!(
        (terminated["exitCode"].clone(), terminated["reason"].clone()),
        (json!(1), json!("Error"))
    );
    assert_eq!(condition(&status, "ContainersReady")["reason"], "PodFailed");
    harness.wait_terminated().await;
    assert_eq!(
        harness.runtime.count("StopPodSandbox"),
        1,
        "the finished pod's sandbox stops"
    );
    assert_eq!(
        harness.runtime.count("CreateContainer"),
        1,
        "Never: no restart"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_restarting_on_failure_ends_succeeded_when_its_container_exits_zero() {
    let mut harness = Harness::new();
    harness.apply(&pod("OnFailure", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.exit("app", 0);
    let status = harness
        .status_where("Succeeded", |s| phase(s) == "Succeeded")
        .await;
    assert_eq!(app(&status)["state"]["terminated"]["reason"], "Completed");
    assert_eq!(condition(&status, "Initialized")["reason"], "PodCompleted");
    harness.wait_terminated().await;
    assert_eq!(harness.runtime.count("CreateContainer"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_crashing_container_restarts_at_once_then_backs_off_from_ten_seconds_doubling() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;

    harness.runtime.exit("app", 1);
    let status = harness
        .status_where("restarted once", |s| {
            app(s)["restartCount"] == 1 && app(s)["state"]["running"].is_object()
        })
        .await;
    assert_eq!(app(&status)["lastState"]["terminated"]["exitCode"], 1);

    harness.runtime.exit("app", 1);
    let began = tokio::time::Instant::now();
    let status = harness
        .status_where("CrashLoopBackOff", |s| {
            waiting_reason(s) == "CrashLoopBackOff"
        })
        .await;
    assert_eq!(
        app(&status)["state"]["waiting"]["message"],
        "back-off 10s restarting failed container=app pod=web_default(u1)"
    );
    assert_eq!(app(&status)["lastState"]["terminated"]["reason"], "Error");
    assert_eq!(
        phase(&status),
        "Running",
        "Always: a crash-looping pod stays Running"
    );
    assert_eq!(condition(&status, "Ready")["status"], "False");

    harness
        .status_where("restarted twice", |s| {
            app(s)["restartCount"] == 2 && app(s)["state"]["running"].is_object()
        })
        .await;
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited <= Duration::from_secs(12),
        "waited {waited:?}"
    );
    assert_eq!(
        harness.runtime.created("app").last().unwrap().annotations["io.kubernetes.container.restartCount"],
        "2"
    );
    assert!(
        harness.runtime.states("app").len() <= 2,
        "one dead container is kept, older ones removed"
    );

    harness.runtime.exit("app", 1);
    let status = harness
        .status_where("back-off 20s", |s| {
            app(s)["state"]["waiting"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("back-off 20s"))
        })
        .await;
    assert_eq!(app(&status)["restartCount"], 2);
}

#[tokio::test(start_paused = true)]
async fn init_containers_run_one_at_a_time_to_completion_before_the_app() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"initContainers": [{"name": "first", "image": IMAGE}, {"name": "second", "image": IMAGE}]}),
    ));
    let status = harness
        .status_where("first init running", |s| {
            s["initContainerStatuses"][0]["state"]["running"].is_object()
        })
        .await;
    assert_eq!(phase(&status), "Pending");
    assert_eq!(waiting_reason(&status), "PodInitializing");
    assert_eq!(
        condition(&status, "Initialized")["message"],
        "containers with incomplete status: [first second]"
    );
    assert!(
        harness.runtime.created("second").is_empty() && harness.runtime.created("app").is_empty()
    );

    harness.runtime.exit("first", 0);
    harness
        .status_where("second init running", |s| {
            s["initContainerStatuses"][1]["state"]["running"].is_object()
        })
        .await;
    assert!(
        harness.runtime.created("app").is_empty(),
        "the app waits for every init container"
    );
    harness.runtime.exit("second", 0);
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert_eq!(condition(&status, "Initialized")["status"], "True");
    assert_eq!(status["initContainerStatuses"][0]["ready"], true);
    assert_eq!(
        harness.runtime.created("first").len(),
        1,
        "a succeeded init container is not run again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_image_under_never_waits_with_err_image_never_pull() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": "nodepulse.test/missing:1", "imagePullPolicy": "Never"}]}),
    ));
    let status = harness
        .status_where("ErrImageNeverPull", |s| {
            waiting_reason(s) == "ErrImageNeverPull"
        })
        .await;
    assert_eq!(
        app(&status)["state"]["waiting"]["message"],
        "Container image \"nodepulse.test/missing:1\" is not present with pull policy of Never"
    );
    assert_eq!(phase(&status), "Pending");
    assert_eq!(harness.runtime.count("PullImage"), 0);
    assert_eq!(harness.runtime.count("CreateContainer"), 0);
}

#[tokio::test(start_paused = true)]
async fn failed_pulls_show_err_image_pull_then_image_pull_back_off() {
    let mut harness = Harness::new();
    harness.runtime.fail_pulls(Some("no route to registry"));
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": "example.test/app"}]}),
    ));
    let status = harness
        .status_where("ErrImagePull", |s| waiting_reason(s) == "ErrImagePull")
        .await;
    let error = waiting_message(&status);
    assert!(error.contains("no route to registry"), "{error}");
    assert_eq!(
        harness.events(),
        [
            "Normal Pulling: Pulling image \"example.test/app:latest\"".to_owned(),
            format!("Warning Failed: Failed to pull image \"example.test/app:latest\": {error}"),
            "Warning Failed: Error: ErrImagePull".to_owned(),
        ]
    );
    // The status write comes back through the watch, and every pod update is a sync.
    let seen = pod(
        "Always",
        json!({"containers": [{"name": "app", "image": "example.test/app"}]}),
    );
    harness.apply(&seen);
    let status = harness
        .status_where("ImagePullBackOff", |s| {
            waiting_reason(s) == "ImagePullBackOff"
        })
        .await;
    assert_eq!(
        app(&status)["state"]["waiting"]["message"],
        format!("Back-off pulling image \"example.test/app:latest\": ErrImagePull: {error}")
    );
    assert!(harness.events().contains(
        &"Normal BackOff: Back-off pulling image \"example.test/app:latest\"".to_owned()
    ));
    assert_eq!(
        harness.runtime.count("PullImage"),
        1,
        "no pull inside the back-off"
    );
    harness.runtime.fail_pulls(None);
    harness
        .status_where("Running once pulls work", |s| phase(s) == "Running")
        .await;
    assert_eq!(harness.runtime.count("PullImage"), 2);
}

pub(super) fn deleted(pod: &Pod, grace: i64) -> Pod {
    let mut pod = pod.clone();
    let deadline = nodepulse_actors::clock::system()() + jiff::SignedDuration::from_secs(grace);
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deadline,
    ));
    pod.metadata.deletion_grace_period_seconds = Some(grace);
    pod
}

#[tokio::test(start_paused = true)]
async fn deletion_stops_containers_with_the_grace_left_then_the_sandbox_then_terminates() {
    let mut harness = Harness::new();
    let running = pod("Always", json!({}));
    harness.apply(&running);
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.apply(&deleted(&running, 30));
    let status = harness
        .status_where("Succeeded", |s| phase(s) == "Succeeded")
        .await;
    assert_eq!(app(&status)["state"]["terminated"]["exitCode"], 0);
    harness.wait_terminated().await;
    let calls: Vec<String> = harness
        .runtime
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("Stop") || c.starts_with("Remove"))
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    // What is left of the 30 s when the worker gets to it.
    assert!(
        calls[0].starts_with("StopContainer")
            && (calls[0].ends_with(" 30s") || calls[0].ends_with(" 29s")),
        "{calls:?}"
    );
    assert!(calls[1].starts_with("StopPodSandbox") && calls[2].starts_with("RemovePodSandbox"));
    assert!(
        harness.runtime.sandbox_configs().is_empty(),
        "nothing is left before TerminatePod"
    );
    assert_eq!(
        harness.events().last().map(String::as_str),
        Some("Normal Killing: Stopping container app")
    );
    let last = harness.updates.last().unwrap();
    assert!(
        matches!(last, PodUpdate::Terminated { .. }),
        "TerminatePod comes after the final status"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pre_stop_hook_runs_first_and_its_time_comes_off_the_grace_period() {
    let mut harness = Harness::new();
    let hooked = pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}}}]}),
    );
    harness.apply(&hooked);
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.exec_takes(Duration::from_secs(5));
    harness.apply(&deleted(&hooked, 30));
    harness.wait_terminated().await;
    let calls: Vec<String> = harness
        .runtime
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("ExecSync") || c.starts_with("StopContainer"))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0].starts_with("ExecSync"),
        "the hook runs before the stop: {calls:?}"
    );
    // 30 s less the hook's 5 whole seconds (and what the worker took before it).
    assert!(
        calls[1].ends_with(" 25s") || calls[1].ends_with(" 24s"),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_evicted_pod_is_killed_and_ends_failed_with_the_evictions_reason() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.stop_with(137);
    let updates = harness.pods.stop_pod(
        &StopPod {
            uid: "u1".to_owned(),
            reason: "Evicted".to_owned(),
            message: "The node was low on resource: memory.".to_owned(),
        },
        nodepulse_actors::clock::system()(),
    );
    harness.updates.extend(updates);
    let status = harness
        .status_where("Failed", |s| phase(s) == "Failed")
        .await;
    assert_eq!(
        (status["reason"].clone(), status["message"].clone()),
        (
            json!("Evicted"),
            json!("The node was low on resource: memory.")
        )
    );
    assert_eq!(
        condition(&status, "DisruptionTarget")["reason"],
        "TerminationByKubelet"
    );
    assert_eq!(app(&status)["state"]["terminated"]["exitCode"], 137);
    assert!(
        harness
            .runtime
            .calls()
            .iter()
            .any(|c| c.starts_with("StopContainer") && c.ends_with(" 2s"))
    );
    harness.wait_terminated().await;
}

#[tokio::test(start_paused = true)]
async fn a_restarted_provider_adopts_running_containers_and_starts_none_twice() {
    let mut first = Harness::new();
    let running = pod("Always", json!({}));
    first.apply(&running);
    first
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    first.runtime.exit("app", 1);
    let before = first
        .status_where("restarted", |s| {
            app(s)["restartCount"] == 1 && app(s)["state"]["running"].is_object()
        })
        .await;
    let runtime = Arc::clone(&first.runtime);
    drop(first);

    let creates = runtime.count("CreateContainer");
    let mut second = Harness::over(Arc::clone(&runtime));
    let mut seen = running.clone();
    seen.status = Some(serde_json::from_value::<PodStatus>(before.clone()).unwrap());
    second.apply(&seen);
    let after = second
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert_eq!(
        app(&after)["restartCount"],
        1,
        "the restart count continues from the annotation"
    );
    assert_eq!(app(&after)["containerID"], app(&before)["containerID"]);
    assert_eq!(after["startTime"], before["startTime"]);
    assert_eq!(after["podIP"], before["podIP"]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        runtime.count("CreateContainer"),
        creates,
        "no container is started twice"
    );
    assert_eq!(runtime.count("RunPodSandbox"), 1);
    assert_eq!(
        runtime
            .states("app")
            .iter()
            .filter(|s| **s == ContainerState::Running)
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn with_no_pods_the_pleg_makes_no_runtime_calls() {
    let mut harness = Harness::new();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(harness.runtime.calls().is_empty());
    let never = pod("Never", json!({}));
    harness.apply(&never);
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.runtime.exit("app", 0);
    harness.wait_terminated().await;
    let calls = harness.runtime.calls().len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        harness.runtime.calls().len(),
        calls,
        "a finished pod is not relisted"
    );
}

#[tokio::test(start_paused = true)]
async fn the_actor_is_woken_through_its_sink_when_updates_wait() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut harness = Harness::new();
    let woken = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&woken);
    harness.pods.set_update_sink(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    assert_eq!(woken.load(Ordering::SeqCst), 0, "nothing waits yet");
    harness.apply(&pod("Always", json!({})));
    let started = tokio::time::Instant::now();
    while woken.load(Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < BUDGET, "never woken");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let updates = harness.pods.tick(nodepulse_actors::clock::system()());
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, PodUpdate::Status { .. })),
        "{updates:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stopped_provider_leaves_what_runs_alone_and_calls_the_runtime_no_more() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.pods.stop();
    let calls = harness.runtime.calls().len();
    harness.runtime.exit("app", 1);
    harness.apply(&pod("Always", json!({})));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        harness.runtime.calls().len(),
        calls,
        "no call after the stop"
    );
    assert_eq!(
        harness.runtime.states("app"),
        [ContainerState::Exited],
        "nothing restarted"
    );
}

#[tokio::test(start_paused = true)]
async fn an_exited_containers_termination_message_outlives_its_file() {
    let mut harness = Harness::new();
    harness.apply(&pod("Never", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let file = harness.runtime.created("app")[0]
        .mounts
        .iter()
        .find(|m| m.container_path == Path::new("/dev/termination-log"))
        .expect("the termination message file is mounted")
        .host_path
        .clone();
    std::fs::write(&file, "DONE").unwrap();
    harness.runtime.exit("app", 0);
    harness
        .status_where("Succeeded with the message", |s| {
            phase(s) == "Succeeded" && app(s)["state"]["terminated"]["message"] == "DONE"
        })
        .await;
    // The pod's directory goes once it ended; the runtime is inspected again.
    std::fs::remove_file(&file).unwrap();
    harness.pods.engine.refresh("u1").await.unwrap();
    let core = harness.pods.engine.core();
    let exited = core.pods["u1"]
        .runtime
        .newest("app")
        .expect("the app container");
    assert_eq!(exited.message, "DONE", "the message read once is kept");
}
