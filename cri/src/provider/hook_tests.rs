//! Lifecycle hooks and termination messages under the CRI provider, against the in-memory
//! runtime and a recording HTTP runner on paused time: a failing postStart hook (exec, httpGet)
//! kills the container with the kubelet's events and message, an httpGet preStop goes to the
//! pod IP, and the message file or the log's tail becomes `state.terminated.message`.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use serde_json::json;

use super::tests::{Harness, IMAGE, app, deleted, phase, pod, waiting_reason};
use nodepulse_actors::ports::{ExecOutput, ProbeAction, ProbeOutcome, ProbeRunner, ProbeTarget};

/// Answers every request with one outcome, and keeps what it was asked.
#[derive(Clone)]
struct RecordingRunner {
    answer: ProbeOutcome,
    asked: Arc<Mutex<Vec<ProbeTarget>>>,
}

impl RecordingRunner {
    fn answering(answer: ProbeOutcome) -> Self {
        Self {
            answer,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<ProbeTarget> {
        self.asked.lock().unwrap().clone()
    }
}

impl ProbeRunner for RecordingRunner {
    fn run(&self, target: ProbeTarget) -> BoxFuture<'static, ProbeOutcome> {
        self.asked.lock().unwrap().push(target);
        futures::future::ready(self.answer.clone()).boxed()
    }
}

fn harness_with(runner: &RecordingRunner) -> Harness {
    let runner = Arc::new(runner.clone()) as Arc<dyn ProbeRunner>;
    Harness::configured(|pods| pods.with_http_hooks(runner))
}

#[tokio::test(start_paused = true)]
async fn a_failing_post_start_exec_hook_kills_the_container_and_shows_post_start_hook_error() {
    let mut harness = Harness::new();
    harness.runtime.exec_answers(ExecOutput {
        stdout: b"out ".to_vec(),
        stderr: b"boom".to_vec(),
        exit_code: 1,
    });
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 1"]}}}}]}),
    ));
    let status = harness
        .status_where("PostStartHookError", |s| {
            waiting_reason(s) == "PostStartHookError"
        })
        .await;
    assert_eq!(
        app(&status)["state"]["waiting"]["message"],
        "Exec lifecycle hook ([sh -c exit 1]) for Container \"app\" in Pod \"web_default(u1)\" \
         failed - error: command 'sh -c exit 1' exited with 1: boom, message: \"out boom\""
    );
    assert!(
        app(&status)["lastState"]["terminated"].is_object(),
        "{status}"
    );
    let events = harness.events();
    let failed = events
        .iter()
        .position(|e| e == "Warning FailedPostStartHook: PostStartHook failed");
    let killing = events
        .iter()
        .position(|e| e == "Normal Killing: FailedPostStartHook");
    assert!(failed.is_some() && failed < killing, "{events:?}");

    harness.runtime.exec_answers(ExecOutput::default());
    harness
        .status_where("restarted once the hook works", |s| {
            app(s)["state"]["running"].is_object() && app(s)["restartCount"] == 1
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_post_start_sleep_hook_holds_the_next_container_back_for_its_seconds() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Always",
        json!({"containers": [
            {"name": "first", "image": IMAGE, "lifecycle": {"postStart": {"sleep": {"seconds": 5}}}},
            {"name": "second", "image": IMAGE}]}),
    ));
    let started = tokio::time::Instant::now();
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert!(started.elapsed() >= Duration::from_secs(5));
    let events = harness.events();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("Normal Started"))
            .count(),
        2,
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e.contains("FailedPostStartHook")));
}

#[tokio::test(start_paused = true)]
async fn a_refused_post_start_http_hook_fails_with_the_kubelets_message() {
    let refused = "Get \"http://10.0.0.1:8080/start\": connection refused";
    let runner = RecordingRunner::answering(ProbeOutcome::Failure(refused.to_owned()));
    let mut harness = harness_with(&runner);
    harness.apply(&pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"postStart": {"httpGet": {"path": "/start", "port": 8080}}}}]}),
    ));
    let status = harness
        .status_where("PostStartHookError", |s| {
            waiting_reason(s) == "PostStartHookError"
        })
        .await;
    assert_eq!(
        app(&status)["state"]["waiting"]["message"],
        format!(
            "HTTP lifecycle hook (/start) for Container \"app\" in Pod \"web_default(u1)\" failed - error: {refused}"
        )
    );
    assert!(
        harness
            .events()
            .contains(&"Warning FailedPostStartHook: PostStartHook failed".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn a_never_pod_whose_post_start_hook_failed_ends_failed_showing_how_it_ended() {
    let runner = RecordingRunner::answering(ProbeOutcome::Failure("connection refused".into()));
    let mut harness = harness_with(&runner);
    // Killed by SIGTERM it did not trap.
    harness.runtime.stop_with(143);
    harness.apply(&pod(
        "Never",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"postStart": {"httpGet": {"path": "/start", "port": 8080}}}}]}),
    ));
    let status = harness
        .status_where("Failed", |s| phase(s) == "Failed")
        .await;
    assert_eq!(
        app(&status)["state"]["terminated"]["exitCode"],
        143,
        "{status}"
    );
    assert_eq!(harness.runtime.created("app").len(), 1, "never restarted");
}

#[tokio::test(start_paused = true)]
async fn an_http_pre_stop_hook_goes_to_the_pod_ip_and_any_answer_is_a_success() {
    let answer = ProbeOutcome::Failure("HTTP probe failed with statuscode: 500".to_owned());
    let runner = RecordingRunner::answering(answer);
    let mut harness = harness_with(&runner);
    let hooked = pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "ports": [{"name": "admin", "containerPort": 9090}],
            "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": "admin",
                "httpHeaders": [{"name": "X-Reason", "value": "delete"}]}}}}]}),
    );
    harness.apply(&hooked);
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    assert!(runner.asked().is_empty(), "no hook before the deletion");
    harness.apply(&deleted(&hooked, 30));
    harness.wait_terminated().await;
    let asked = runner.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0].action,
        ProbeAction::HttpGet {
            scheme: "http".to_owned(),
            host: status["podIP"].as_str().unwrap().to_owned(),
            port: 9090,
            path: "/drain".to_owned(),
            headers: vec![
                ("X-Reason".to_owned(), "delete".to_owned()),
                ("User-Agent".to_owned(), "kube-lifecycle/1.36".to_owned()),
            ],
        }
    );
    assert!(asked[0].timeout <= Duration::from_secs(30));
    assert!(
        !harness
            .events()
            .iter()
            .any(|e| e.contains("FailedPreStopHook")),
        "{:?}",
        harness.events()
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_http_pre_stop_hook_records_failed_pre_stop_hook() {
    let runner = RecordingRunner::answering(ProbeOutcome::Failure("connection refused".into()));
    let mut harness = harness_with(&runner);
    let hooked = pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": 80}}}}]}),
    );
    harness.apply(&hooked);
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    harness.apply(&deleted(&hooked, 30));
    harness.wait_terminated().await;
    assert!(
        harness
            .events()
            .contains(&"Warning FailedPreStopHook: PreStopHook failed".to_owned()),
        "{:?}",
        harness.events()
    );
}

#[tokio::test(start_paused = true)]
async fn the_termination_message_file_becomes_the_terminated_states_message() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Never",
        json!({"containers": [{"name": "app", "image": IMAGE, "terminationMessagePath": "/tmp/why"}]}),
    ));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let config = harness.runtime.created("app").remove(0);
    let file = config
        .mounts
        .iter()
        .find(|m| m.container_path.to_str() == Some("/tmp/why"))
        .expect("the message file is mounted");
    std::fs::write(&file.host_path, "disk full").unwrap();
    harness.runtime.exit("app", 1);
    let status = harness
        .status_where("Failed", |s| phase(s) == "Failed")
        .await;
    let terminated = &app(&status)["state"]["terminated"];
    assert_eq!(terminated["message"], "disk full");
    assert_eq!(terminated["reason"], "Error");
}

#[tokio::test(start_paused = true)]
async fn fallback_to_logs_on_error_gives_a_failed_container_its_logs_last_80_lines() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Never",
        json!({"containers": [{"name": "app", "image": IMAGE,
            "terminationMessagePolicy": "FallbackToLogsOnError"}]}),
    ));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let config = harness.runtime.created("app").remove(0);
    let log_dir = harness.runtime.sandbox_configs().remove(0).log_directory;
    let log = log_dir.join(&config.log_path);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let lines: String = (1..=100)
        .map(|n| format!("2026-12-01T09:00:00.000000000Z stdout F line {n}\n"))
        .collect();
    std::fs::write(&log, lines).unwrap();
    harness.runtime.exit("app", 2);
    let status = harness
        .status_where("Failed", |s| phase(s) == "Failed")
        .await;
    let expected: String = (21..=100).map(|n| format!("line {n}\n")).collect();
    assert_eq!(app(&status)["state"]["terminated"]["message"], expected);
}

#[test]
fn an_http_hook_that_cannot_be_sent_says_why_in_the_kubelets_words() {
    use k8s_openapi::{
        api::core::v1::{Container, HTTPGetAction},
        apimachinery::pkg::util::intstr::IntOrString,
    };

    use super::hooks::{HookError, HttpHookError, http_action};

    let container = Container {
        name: "app".to_owned(),
        ..Container::default()
    };
    let action = |port: IntOrString| HTTPGetAction {
        port,
        ..HTTPGetAction::default()
    };
    let ips = ["10.0.0.5".to_owned()];
    let cases = [
        (
            http_action(&action(IntOrString::String("web".into())), &container, &ips),
            HttpHookError::NoSuchPort {
                port: "web".into(),
                container: "app".into(),
            },
            "couldn't find port: web in app",
        ),
        (
            http_action(&action(IntOrString::Int(70_000)), &container, &ips),
            HttpHookError::InvalidPort(70_000),
            "invalid port number: 70000",
        ),
        (
            http_action(&action(IntOrString::Int(80)), &container, &[]),
            HttpHookError::NoPodIp,
            "failed to find networking container",
        ),
    ];
    for (result, error, text) in cases {
        assert_eq!(result, Err(error.clone()));
        assert_eq!(error.to_string(), text);
    }
    assert_eq!(
        HookError::NoHandler.to_string(),
        "Cannot run handler: invalid handler: neither exec, httpGet nor sleep"
    );
    assert_eq!(HookError::Cancelled.to_string(), "context canceled");
}
