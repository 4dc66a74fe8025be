//! Probes on real containers through a whole `runtime: cri` node, seen in the API: an httpGet
//! readiness probe flips the pod's Ready condition as the container serves or drops the file;
//! a failing liveness probe restarts the container with `Unhealthy` and `Killing`; an exec
//! probe past its timeout fails with the kubelet's text; a startup probe holds off liveness;
//! a tcpSocket probe is ready once the port listens; and the prober, the pod lifecycle actor
//! and StatusManager killed in every mode keep a Ready pod Ready throughout, and it is probed
//! again; `/debug/probes` shows each worker. The daemon probes the pod IP from the host
//! (the test's CNI bridge, 198.18.1.0/24, is in the host's network namespace).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nodepulse::debug::{self, FaultInjectionGate};
use nodepulse_actors::{pods, ports::ContainerRuntime, prober, status_manager};
use nodepulse_supervisor::{ChildState, KillMode};
use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    objects::wait_pod_event,
    pods::{condition, phase, running_and_ready, wait_pod},
};
use serde_json::{Value, json};

use crate::cri_pods::{Setup, UNTIL_TERM, app, create_pod, runtime_id, shell, spec};

const NAMESPACE: &str = "default";

/// A container serving `/tmp/www` on port 8080 with busybox's httpd, until SIGTERM.
const HTTPD: &str = "mkdir -p /tmp/www; busybox httpd -p 8080 -h /tmp/www";

fn exec_probe(command: &[&str], extra: Value) -> Value {
    let mut probe = json!({"exec": {"command": command}, "periodSeconds": 1});
    if let (Some(probe), Value::Object(extra)) = (probe.as_object_mut(), extra) {
        probe.extend(extra);
    }
    probe
}

/// Runs `command` in the pod's app container (the test's own hand on the container).
async fn exec(fixture: &CriFixture, pod: &Pod, command: &[&str]) {
    let output = fixture
        .client
        .exec_sync(
            runtime_id(&app(pod)),
            command.iter().map(|s| (*s).to_owned()).collect(),
            Duration::from_secs(10),
        )
        .await
        .expect("ExecSync");
    assert_eq!(output.exit_code, 0, "{command:?} in the container");
}

fn ready(pod: &Pod) -> Option<String> {
    condition(pod, "Ready")
}

/// Running, its app container running, and Ready False: probed, not yet ready.
fn running_not_ready(pod: &Pod) -> bool {
    let running = app(pod).state.is_some_and(|s| s.running.is_some());
    phase(pod) == Some("Running") && running && ready(pod).as_deref() == Some("False")
}

/// The messages of the Events about this very pod.
async fn event_messages(cluster: &TestCluster, pod: &Pod) -> Vec<String> {
    let events = nodepulse_testkit::objects::pod_events(cluster, pod).await;
    events.into_iter().filter_map(|e| e.message).collect()
}

/// The prober's consecutive successes for `pod`'s container, from its own state.
async fn successes(node: &CriNode, pod: &Pod) -> Option<u64> {
    let state = node
        .supervisor
        .actor_state(prober::NAME, Duration::from_secs(1))
        .await
        .ok()?;
    let uid = pod.metadata.uid.as_deref()?;
    (state["workers"].as_array()?.iter())
        .find(|w| w["podUID"] == uid && w["kind"] == "Readiness")
        .and_then(|w| w["consecutiveSuccesses"].as_u64())
}

/// Creates a pod of `container` (restart policy Always) and waits until it runs, not ready.
async fn start_unready(cluster: &TestCluster, node: &str, name: &str, container: Value) -> Pod {
    create_pod(cluster, node, name, spec("Always", json!([container]))).await;
    wait_pod(
        &cluster.client,
        NAMESPACE,
        name,
        "running, not ready",
        running_not_ready,
    )
    .await
}

/// `GET /debug/probes` of a debug endpoint serving `node`: the prober's workers.
async fn debug_probes(node: &CriNode) -> Vec<Value> {
    let gate = FaultInjectionGate::new(false, None);
    let endpoint = debug::start(
        "127.0.0.1:0".parse().expect("address"),
        vec![node.supervisor.clone()],
        gate,
        debug::Extras::default(),
    )
    .expect("binds");
    let url = format!("http://{}/debug/probes", endpoint.address);
    let server = endpoint.server;
    let handle = server.handle();
    actix_rt::spawn(server);
    let response = reqwest::get(&url).await.expect("GET /debug/probes");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let body: Value = response.json().await.expect("JSON");
    handle.stop();
    body["workers"].as_array().cloned().unwrap_or_default()
}

#[actix_rt::test]
async fn an_http_readiness_probe_flips_the_ready_condition_as_the_container_serves_the_file() {
    let test = "an_http_readiness_probe_flips_the_ready_condition_as_the_container_serves_the_file";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "probe-http").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-web", node.name);
        let mut container = shell("app", &format!("{HTTPD}; {UNTIL_TERM}"));
        container["readinessProbe"] = json!({
            "httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1, "failureThreshold": 1,
        });
        let pod = start_unready(&cluster, &node.name, &name, container).await;
        wait_pod_event(&cluster, &pod, "Warning", "Unhealthy", |m| {
            m == "Readiness probe failed: HTTP probe failed with statuscode: 404"
        })
        .await;

        let workers = debug_probes(&node).await;
        let worker = (workers.iter())
            .find(|w| w["podUID"] == pod.metadata.uid.as_deref().unwrap_or_default())
            .unwrap_or_else(|| panic!("/debug/probes shows the pod's worker: {workers:?}"));
        assert_eq!(
            (&worker["pod"], &worker["container"], &worker["kind"]),
            (&json!(name), &json!("app"), &json!("Readiness")),
        );
        assert_eq!(worker["lastResult"], "Failure", "{worker}");
        assert!(
            worker["consecutiveFailures"].as_u64() >= Some(1),
            "{worker}"
        );
        assert!(worker["nextRun"].is_string(), "{worker}");

        exec(&fixture, &pod, &["touch", "/tmp/www/ready"]).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Ready",
            running_and_ready,
        )
        .await;
        assert!(app(&pod).ready, "the container is ready");
        assert_eq!(condition(&pod, "ContainersReady").as_deref(), Some("True"));

        exec(&fixture, &pod, &["busybox", "rm", "/tmp/www/ready"]).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "not Ready again",
            running_not_ready,
        )
        .await;
        assert_eq!(
            app(&pod).restart_count,
            0,
            "readiness never restarts a container"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_failing_liveness_probe_restarts_the_container_with_unhealthy_and_killing_events() {
    let test = "a_failing_liveness_probe_restarts_the_container_with_unhealthy_and_killing_events";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "probe-live").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-live", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["livenessProbe"] = exec_probe(
            &["test", "-e", "/tmp/alive"],
            json!({"failureThreshold": 2, "terminationGracePeriodSeconds": 5}),
        );
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([container])),
        )
        .await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "restarted", |pod| {
            app(pod).restart_count >= 1
        })
        .await;
        wait_pod_event(&cluster, &pod, "Warning", "Unhealthy", |m| {
            m.starts_with("Liveness probe failed:")
        })
        .await;
        wait_pod_event(&cluster, &pod, "Normal", "Killing", |m| {
            m == "Container app failed liveness probe, will be restarted"
        })
        .await;
        let last = app(&pod).last_state.and_then(|s| s.terminated);
        assert!(
            last.is_some(),
            "the killed run is the last state: {:?}",
            app(&pod)
        );
    })
    .await;
}

#[actix_rt::test]
async fn an_exec_probe_that_outlasts_its_timeout_fails_with_the_kubelets_text() {
    let test = "an_exec_probe_that_outlasts_its_timeout_fails_with_the_kubelets_text";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "probe-slow").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-slow", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["readinessProbe"] = exec_probe(
            &["sleep", "5"],
            json!({"timeoutSeconds": 1, "failureThreshold": 1}),
        );
        let pod = start_unready(&cluster, &node.name, &name, container).await;
        wait_pod_event(&cluster, &pod, "Warning", "Unhealthy", |m| {
            m == "Readiness probe failed: command timed out: \"sleep 5\" timed out after 1s"
        })
        .await;
        let pod = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
            .get(&name)
            .await
            .expect("the pod");
        assert_eq!(
            ready(&pod).as_deref(),
            Some("False"),
            "a timed-out probe is a failure"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_startup_probe_holds_off_liveness_until_it_succeeds() {
    let test = "a_startup_probe_holds_off_liveness_until_it_succeeds";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "probe-start").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-slowstart", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["startupProbe"] = exec_probe(
            &["test", "-e", "/tmp/started"],
            json!({"failureThreshold": 60}),
        );
        // Would restart the container at its first failure, were it not held off.
        container["livenessProbe"] = exec_probe(
            &["test", "-e", "/tmp/started"],
            json!({"failureThreshold": 1}),
        );
        let pod = start_unready(&cluster, &node.name, &name, container).await;
        assert_eq!(
            app(&pod).started,
            Some(false),
            "not started before its startup probe"
        );
        // Startup fails while liveness, which would fail too, is never run.
        wait_pod_event(&cluster, &pod, "Warning", "Unhealthy", |m| {
            m.starts_with("Startup probe failed:")
        })
        .await;
        exec(&fixture, &pod, &["touch", "/tmp/started"]).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "started and Ready",
            |pod| running_and_ready(pod) && app(pod).started == Some(true),
        )
        .await;
        assert_eq!(
            app(&pod).restart_count,
            0,
            "liveness was held off: never restarted"
        );
        let events = event_messages(&cluster, &pod).await;
        let liveness: Vec<&String> = (events.iter())
            .filter(|m| m.starts_with("Liveness probe"))
            .collect();
        assert!(
            liveness.is_empty(),
            "liveness never ran before startup: {liveness:?}"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_tcp_readiness_probe_is_ready_once_the_port_listens() {
    let test = "a_tcp_readiness_probe_is_ready_once_the_port_listens";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "probe-tcp").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-tcp", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["readinessProbe"] = json!({
            "tcpSocket": {"port": "web"}, "periodSeconds": 1, "failureThreshold": 1,
        });
        container["ports"] = json!([{"name": "web", "containerPort": 8080}]);
        let pod = start_unready(&cluster, &node.name, &name, container).await;
        wait_pod_event(&cluster, &pod, "Warning", "Unhealthy", |m| {
            m.starts_with("Readiness probe failed: dial tcp")
        })
        .await;
        exec(
            &fixture,
            &pod,
            &["busybox", "httpd", "-p", "8080", "-h", "/tmp"],
        )
        .await;
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Ready",
            running_and_ready,
        )
        .await;
    })
    .await;
}

/// When the pod's Ready condition last changed, as nodepulse wrote it.
fn ready_since(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some(format!("{:?}", ready.last_transition_time.as_ref()?))
}

/// Polls the pod until `done` holds, failing at once if its Ready condition is ever not True.
async fn ready_throughout<F, Fut>(cluster: &TestCluster, name: &str, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    nodepulse_testkit::eventually_async(what, || {
        let (pods, done) = (pods.clone(), done());
        async move {
            let pod = pods.get(name).await.expect("the pod");
            assert_eq!(
                ready(&pod).as_deref(),
                Some("True"),
                "{name} stays Ready while {what}: {:?}",
                pod.status
            );
            done.await
        }
    })
    .await;
}

#[actix_rt::test]
async fn the_prober_pod_and_status_actors_killed_in_every_mode_keep_a_ready_pod_ready() {
    let test = "the_prober_pod_and_status_actors_killed_in_every_mode_keep_a_ready_pod_ready";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "probe-kill").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-steady", node.name);
        let mut container = shell("app", &format!("touch /tmp/ready; {UNTIL_TERM}"));
        container["readinessProbe"] = exec_probe(
            &["test", "-e", "/tmp/ready"],
            json!({"failureThreshold": 1}),
        );
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
            "Ready",
            running_and_ready,
        )
        .await;

        // The prober first; then the actors the readiness flows through.
        let actors = [prober::NAME, pods::NAME, status_manager::NAME];
        for (actor, mode) in actors.into_iter().flat_map(|actor| {
            [KillMode::Stop, KillMode::Panic, KillMode::Hang].map(|mode| (actor, mode))
        }) {
            let before = node.supervisor.actor(actor).expect("the actor").restarts;
            let probed = successes(&node, &pod)
                .await
                .expect("the prober probes the pod");
            node.supervisor
                .kill(actor, mode)
                .await
                .unwrap_or_else(|error| panic!("kill {actor} ({mode:?}): {error:?}"));
            let what = format!("{actor} runs again after {mode:?} and the pod is probed again");
            ready_throughout(&cluster, &name, &what, || async {
                let restarted = node.supervisor.actor(actor).is_some_and(|actor| {
                    actor.restarts > before && actor.state == ChildState::Running
                });
                restarted
                    && successes(&node, &pod)
                        .await
                        .is_some_and(|now| now > probed + 1)
            })
            .await;
        }
        // A flip and back between two polls would still have moved the transition time.
        let now = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
            .get(&name)
            .await
            .expect("the pod");
        assert!(ready_since(&pod).is_some(), "Ready has a transition time");
        assert_eq!(
            ready_since(&now),
            ready_since(&pod),
            "Ready never changed while the actors were killed"
        );
        // The restarted prober probes: the file gone, the pod is not Ready.
        exec(&fixture, &pod, &["busybox", "rm", "/tmp/ready"]).await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "not Ready",
            running_not_ready,
        )
        .await;
        assert_eq!(app(&pod).restart_count, 0);
    })
    .await;
}
