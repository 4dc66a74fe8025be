//! Container lifecycle on containerd through a whole `runtime: cri` node, against an API server
//! (the emulator, or a real cluster): a sidecar runs beside the app, is restarted when it
//! exits, and is stopped once a `Never` pod's app succeeded; a postStart hook writes what the
//! app reads, a failing one restarts the container; an httpGet preStop hook reaches a server;
//! the termination message file and the log fallback show in `state.terminated.message`.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use nodepulse_actors::ports::ContainerRuntime;
use nodepulse_testkit::{
    cri_fixture::CriFixture,
    objects::wait_pod_event,
    pods::{phase, wait_pod},
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::Mutex,
};

use super::cri_pods::{
    Setup, UNTIL_TERM, app, create_pod, delete_and_wait_gone, runtime_id, shell, spec, wait_phase,
};

const NAMESPACE: &str = "default";

/// A shell that runs until `/tmp/<file>` appears, then exits with `code`; SIGTERM ends it
/// with 0.
fn until_file(file: &str, code: i32) -> String {
    format!(
        "trap 'exit 0' TERM; while [ ! -e /tmp/{file} ]; do sleep 1 & wait $!; done; exit {code}"
    )
}

fn first_init(pod: &Pod) -> ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|all| all.first().cloned())
        .unwrap_or_default()
}

fn running(status: &ContainerStatus) -> bool {
    status.state.as_ref().is_some_and(|s| s.running.is_some())
}

fn terminated_message(status: &ContainerStatus) -> Option<String> {
    status.state.clone()?.terminated?.message
}

/// Makes `/tmp/<file>` in the container of `status`.
async fn touch(fixture: &CriFixture, status: &ContainerStatus, file: &str) {
    let command = vec!["touch".to_owned(), format!("/tmp/{file}")];
    let output = fixture
        .client
        .exec_sync(runtime_id(status), command, Duration::from_secs(10))
        .await
        .expect("ExecSync");
    assert_eq!(output.exit_code, 0, "touch /tmp/{file}");
}

#[actix_rt::test]
async fn a_sidecar_runs_beside_the_app_is_restarted_and_stops_once_a_never_pod_succeeded() {
    let test = "a_sidecar_runs_beside_the_app_is_restarted_and_stops_once_a_never_pod_succeeded";
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(test, "cri-sidecar").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-sidecar", node.name);
        let mut manifest = spec("Never", json!([shell("app", &until_file("done", 0))]));
        let mut proxy = shell("proxy", &until_file("quit", 1));
        proxy["restartPolicy"] = json!("Always");
        manifest["spec"]["initContainers"] = json!([proxy]);
        create_pod(&cluster, &node.name, &name, manifest).await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "the app runs", |p| {
            phase(p) == Some("Running") && running(&app(p))
        })
        .await;
        let sidecar = first_init(&pod);
        assert!(running(&sidecar), "the sidecar runs beside the app");
        assert_eq!((sidecar.started, sidecar.ready), (Some(true), true));

        touch(&fixture, &sidecar, "quit").await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "the sidecar restarted",
            |p| first_init(p).restart_count == 1 && running(&first_init(p)),
        )
        .await;
        let last = first_init(&pod).last_state.and_then(|s| s.terminated);
        assert_eq!(last.map(|t| t.exit_code), Some(1));
        assert_eq!(phase(&pod), Some("Running"));
        assert_eq!(app(&pod).restart_count, 0, "the app kept running");

        touch(&fixture, &app(&pod), "done").await;
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Succeeded with its sidecar stopped",
            |p| {
                phase(p) == Some("Succeeded")
                    && first_init(p).state.is_some_and(|s| s.terminated.is_some())
            },
        )
        .await;
        let done = app(&pod).state.and_then(|s| s.terminated);
        assert_eq!(done.map(|t| t.exit_code), Some(0));
    })
    .await;
}

#[actix_rt::test]
async fn a_post_start_hook_writes_what_the_app_reads_and_a_failing_one_restarts_it() {
    let test = "a_post_start_hook_writes_what_the_app_reads_and_a_failing_one_restarts_it";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cri-poststart").await
    else {
        return;
    };
    node.guard(async {
        // The app waits for the hook's file and hands its content back as its termination
        // message.
        let name = format!("{}-hooked", node.name);
        let script = "while [ ! -e /tmp/hooked ]; do sleep 1; done; \
                      cat /tmp/hooked > /dev/termination-log; exit 0";
        let mut container = shell("app", script);
        container["lifecycle"] = json!({"postStart": {"exec": {"command":
            ["/bin/sh", "-c", "echo written by the hook > /tmp/hooked"]}}});
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Never", json!([container])),
        )
        .await;
        let pod = wait_phase(&cluster, &name, "Succeeded").await;
        assert_eq!(
            terminated_message(&app(&pod)).as_deref(),
            Some("written by the hook\n")
        );

        let failing = format!("{}-failing", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["lifecycle"] =
            json!({"postStart": {"exec": {"command": ["/bin/sh", "-c", "exit 7"]}}});
        let pod = create_pod(
            &cluster,
            &node.name,
            &failing,
            spec("Always", json!([container])),
        )
        .await;
        wait_pod_event(&cluster, &pod, "Warning", "FailedPostStartHook", |m| {
            m == "PostStartHook failed"
        })
        .await;
        wait_pod_event(&cluster, &pod, "Normal", "Killing", |m| {
            m == "FailedPostStartHook"
        })
        .await;
        wait_pod(&cluster.client, NAMESPACE, &failing, "restarted", |p| {
            app(p).restart_count >= 1
        })
        .await;
    })
    .await;
}

/// A server on the node's loopback that answers every request 204 and keeps each request's
/// head.
async fn hook_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            // The head may come in several segments: read up to its blank line.
            let mut head = Vec::new();
            let mut chunk = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => head.extend_from_slice(&chunk[..read]),
                }
            }
            kept.lock()
                .await
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = stream
                .write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                .await;
        }
    });
    (port, seen)
}

#[actix_rt::test]
async fn an_http_pre_stop_hook_reaches_its_server_before_the_container_stops() {
    let test = "an_http_pre_stop_hook_reaches_its_server_before_the_container_stops";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cri-prestop").await
    else {
        return;
    };
    let (port, seen) = hook_server().await;
    node.guard(async {
        let name = format!("{}-drained", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["lifecycle"] = json!({"preStop": {"httpGet":
            {"host": "127.0.0.1", "port": port, "path": "/drain"}}});
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([container])),
        )
        .await;
        wait_pod(&cluster.client, NAMESPACE, &name, "running", |p| {
            running(&app(p))
        })
        .await;
        assert!(seen.lock().await.is_empty(), "no hook before the deletion");
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        let gone = delete_and_wait_gone(&api, &name, 10).await;
        let requests = seen.lock().await.clone();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert!(
            requests[0].starts_with("GET /drain HTTP/1.1\r\n"),
            "{requests:?}"
        );
        assert!(
            // Header names are case-insensitive; the client sends them lower-cased.
            requests[0]
                .to_ascii_lowercase()
                .contains("user-agent: kube-lifecycle/1.36\r\n"),
            "{requests:?}"
        );
        let end = app(&gone).state.and_then(|s| s.terminated);
        assert_eq!(end.map(|t| t.exit_code), Some(0), "then SIGTERM, trapped");
    })
    .await;
}

#[actix_rt::test]
async fn a_failed_containers_log_tail_is_its_message_under_fallback_to_logs_on_error() {
    let test = "a_failed_containers_log_tail_is_its_message_under_fallback_to_logs_on_error";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cri-fallback").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-fallback", node.name);
        let mut container = shell("app", "echo first; echo last words >&2; exit 3");
        container["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Never", json!([container])),
        )
        .await;
        let pod = wait_phase(&cluster, &name, "Failed").await;
        let status = app(&pod);
        let end = status.state.clone().and_then(|s| s.terminated);
        assert_eq!(end.map(|t| t.exit_code), Some(3));
        // Both streams. Their relative order is the runtime's: stdout and stderr are two
        // pipes, and containerd may write the second line it reads first.
        let message = terminated_message(&status).unwrap_or_default();
        let mut lines: Vec<&str> = message.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["first", "last words"], "{message:?}");
        assert!(message.ends_with('\n'), "{message:?}");
    })
    .await;
}
