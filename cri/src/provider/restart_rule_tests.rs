//! ContainerRestartRules (on in the kubelet 1.36) under the CRI provider: a container's own
//! `restartPolicy` and `restartPolicyRules` decide before the pod's policy whether it starts
//! again, in the pure plan and against the in-memory runtime on paused time.

use serde_json::json;

use super::{
    plan::{Kind, plan},
    sidecar_tests::{instance, runtime},
    tests::{Harness, IMAGE, app, phase, pod},
    view::PodRuntime,
};
use nodepulse_actors::ports::ContainerState;

/// The upstream specs' rule: restart on exit code 42.
fn restart_on_42() -> serde_json::Value {
    json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}])
}

fn app_with(own: serde_json::Value) -> serde_json::Value {
    let mut container = json!({"name": "app", "image": IMAGE});
    container
        .as_object_mut()
        .unwrap()
        .extend(own.as_object().unwrap().clone());
    json!({"containers": [container]})
}

fn exited(exit_code: i32) -> PodRuntime {
    runtime(vec![instance("app", ContainerState::Exited, exit_code, 2)])
}

#[test]
fn the_plan_restarts_by_the_containers_own_policy_and_rules_before_the_pods() {
    let restarted = vec![(Kind::App, "app".to_owned())];
    let cases = [
        ("Never", json!({"restartPolicy": "Always"}), 1, true),
        ("Never", json!({"restartPolicy": "OnFailure"}), 1, true),
        ("Never", json!({"restartPolicy": "OnFailure"}), 0, false),
        ("Always", json!({"restartPolicy": "Never"}), 1, false),
        (
            "Never",
            json!({"restartPolicy": "Never", "restartPolicyRules": restart_on_42()}),
            42,
            true,
        ),
        (
            "Never",
            json!({"restartPolicy": "Never", "restartPolicyRules": restart_on_42()}),
            1,
            false,
        ),
        (
            "Never",
            json!({"restartPolicy": "Never", "restartPolicyRules": [
                {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}]}),
            3,
            true,
        ),
        // Rules are read only beside a container's own policy, as the API requires.
        (
            "Never",
            json!({"restartPolicyRules": restart_on_42()}),
            42,
            false,
        ),
        ("Always", json!({}), 0, true),
    ];
    for (policy, own, exit_code, restarts) in cases {
        let spec = pod(policy, app_with(own.clone()));
        let plan = plan(&spec, &exited(exit_code));
        let label = format!("pod {policy}, container {own}, exit {exit_code}");
        if restarts {
            assert_eq!(plan.start, restarted, "{label}");
            assert!(!plan.kill_pod, "{label}");
        } else {
            assert!(plan.start.is_empty(), "{label}: {plan:?}");
            assert!(plan.kill_pod, "{label}: the pod is done");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_container_whose_rule_matches_its_exit_code_runs_again_in_a_never_pod() {
    let mut harness = Harness::new();
    harness.apply(&pod(
        "Never",
        app_with(json!({"restartPolicy": "Never", "restartPolicyRules": restart_on_42()})),
    ));
    harness
        .status_where("app runs", |s| app(s)["state"]["running"].is_object())
        .await;
    harness.runtime.exit("app", 42);
    let status = harness
        .status_where("app runs again", |s| {
            app(s)["restartCount"] == 1 && app(s)["state"]["running"].is_object()
        })
        .await;
    assert_eq!(phase(&status), "Running");
    assert_eq!(app(&status)["lastState"]["terminated"]["exitCode"], 42);

    harness.runtime.exit("app", 1);
    let status = harness
        .status_where("the pod failed", |s| phase(s) == "Failed")
        .await;
    assert_eq!(
        app(&status)["restartCount"],
        1,
        "not restarted on exit 1: {status}"
    );
    assert_eq!(
        app(&status)["state"]["terminated"]["exitCode"],
        1,
        "{status}"
    );
}
