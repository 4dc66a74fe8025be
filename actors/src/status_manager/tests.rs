//! The status manager's rules on fixed pods: versioning and dedup, illegal transitions,
//! transition times, ownership in the merge, terminal phases and termination.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::json;

use super::{
    cache::{PodStatusCache, UpdateOutcome},
    merge::merge_pod_status,
    terminate::terminated_status,
};

fn pod(restart_policy: &str, status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-1"},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "app", "image": "nginx"}]},
        "status": status,
    }))
    .expect("pod")
}

fn status(value: serde_json::Value) -> PodStatus {
    serde_json::from_value(value).expect("status")
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("time")
}

fn running(ready: &str) -> PodStatus {
    status(json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": ready}, {"type": "example.com/gate", "status": "True"}],
        "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "ready": ready == "True", "restartCount": 0, "state": {"running": {}}}]
    }))
}

#[test]
fn every_change_gets_a_new_version_and_an_identical_status_is_dropped() {
    let mut cache = PodStatusCache::default();
    let pod = pod("Always", json!({"phase": "Pending"}));
    assert_eq!(
        cache.update(&pod, running("False"), false, false, at(0)),
        UpdateOutcome::Stored { version: 1 }
    );
    assert_eq!(
        cache.update(&pod, running("False"), false, false, at(5)),
        UpdateOutcome::Unchanged
    );
    assert_eq!(
        cache.update(&pod, running("True"), false, false, at(6)),
        UpdateOutcome::Stored { version: 2 }
    );
    assert_eq!(
        cache.update(&pod, running("True"), true, false, at(7)),
        UpdateOutcome::Stored { version: 3 },
        "forced"
    );
    assert_eq!(cache.unsent_pods(), ["uid-1"]);
    cache.mark_sent("uid-1", 3);
    assert!(cache.unsent_pods().is_empty());
}

#[test]
fn a_removed_pod_leaves_nothing_even_when_its_sync_ends_after() {
    let mut cache = PodStatusCache::default();
    let uids: Vec<String> = (0..64).map(|index| format!("uid-{index}")).collect();
    for uid in &uids {
        let mut pod = pod("Always", json!({}));
        pod.metadata.uid = Some(uid.clone());
        cache.update(&pod, running("True"), false, false, at(0));
        cache.mark_sent(uid, 1);
    }
    for uid in &uids {
        cache.remove(uid);
        // The pod's sync was in flight when it went: its end records nothing.
        cache.mark_sent(uid, 1);
    }
    assert_eq!(cache.footprint(), (0, 0), "entries, table slots");
}

#[test]
fn others_conditions_do_not_count_as_a_change() {
    let mut cache = PodStatusCache::default();
    let pod = pod("Always", json!({}));
    cache.update(&pod, running("True"), false, false, at(0));
    let mut gate_flipped = running("True");
    gate_flipped.conditions.as_mut().expect("conditions")[1].status = "False".into();
    assert_eq!(
        cache.update(&pod, gate_flipped, false, false, at(1)),
        UpdateOutcome::Unchanged
    );
}

#[test]
fn transition_times_move_only_when_the_status_does_and_start_time_is_kept() {
    let mut cache = PodStatusCache::default();
    let pod = pod("Always", json!({}));
    cache.update(&pod, running("False"), false, false, at(0));
    cache.update(&pod, running("True"), false, false, at(10));
    cache.update(
        &pod,
        PodStatus {
            message: Some("x".into()),
            ..running("True")
        },
        false,
        false,
        at(20),
    );
    let stored = cache.get("uid-1").expect("cached").status.get();
    let ready = stored
        .conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .expect("Ready");
    assert_eq!(
        ready.last_transition_time.as_ref().map(|t| t.0),
        Some(at(10))
    );
    assert_eq!(stored.start_time.as_ref().map(|t| t.0), Some(at(0)));
}

#[test]
fn a_terminated_container_is_not_revived_unless_the_policy_restarts_it() {
    let done = status(
        json!({"phase": "Succeeded", "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}),
    );
    for (policy, revived_ok) in [("Never", false), ("OnFailure", false), ("Always", true)] {
        let mut cache = PodStatusCache::default();
        let pod = pod(policy, json!({}));
        cache.update(&pod, done.clone(), false, false, at(0));
        let outcome = cache.update(&pod, running("True"), false, false, at(1));
        assert_eq!(
            matches!(outcome, UpdateOutcome::Stored { .. }),
            revived_ok,
            "{policy}: {outcome:?}"
        );
        if let UpdateOutcome::Rejected(rejection) = outcome {
            assert_eq!(
                rejection.to_string(),
                format!(
                    "attempted illegal transition for container \"app\": terminated to non-terminated with restartPolicy {policy}"
                )
            );
        }
    }
    let failed = status(
        json!({"containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}]}),
    );
    let mut cache = PodStatusCache::default();
    let on_failure = pod("OnFailure", json!({}));
    cache.update(&on_failure, failed, false, false, at(0));
    assert!(
        matches!(
            cache.update(&on_failure, running("True"), false, false, at(1)),
            UpdateOutcome::Stored { .. }
        ),
        "OnFailure restarts a failed container"
    );
}

#[test]
fn the_merge_keeps_others_conditions_and_the_api_claims_and_forces_terminal_pods_unready() {
    let api = status(
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}, {"type": "example.com/gate", "status": "True"}], "resourceClaimStatuses": [{"name": "gpu"}]}),
    );
    let merged = merge_pod_status(&api, &running("True"), false, at(0));
    let kinds: Vec<(String, String)> = merged
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        kinds,
        [
            ("example.com/gate".to_owned(), "True".to_owned()),
            ("Ready".to_owned(), "True".to_owned())
        ]
    );
    assert_eq!(
        merged.resource_claim_statuses.map(|claims| claims.len()),
        Some(1)
    );

    let finished = PodStatus {
        phase: Some("Succeeded".into()),
        ..running("True")
    };
    let held = merge_pod_status(&api, &finished, true, at(1));
    assert_eq!(
        held.phase.as_deref(),
        Some("Running"),
        "terminal phase held back while containers may run"
    );
    let terminal = merge_pod_status(&api, &finished, false, at(1));
    assert_eq!(terminal.phase.as_deref(), Some("Succeeded"));
    let ready = terminal
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(
        ready.status, "False",
        "a terminal pod is never Ready (kubernetes#108594)"
    );
}

#[test]
fn termination_marks_running_containers_unknown_and_fails_the_pod() {
    let pod = pod("Never", json!({}));
    let ended = terminated_status(&pod, &running("True"));
    assert_eq!(ended.phase.as_deref(), Some("Failed"));
    let container = &ended.container_statuses.expect("statuses")[0];
    let terminated = container
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (137, Some("ContainerStatusUnknown"))
    );
    assert_eq!(
        terminated.message.as_deref(),
        Some("The container could not be located when the pod was terminated")
    );
    assert!(!container.ready);
}

/// A status as nodepulse builds it (times to the nanosecond, no `lastState`) is cached in the
/// form the API serves it back, so the watch's pod then has exactly the cached status.
#[test]
fn a_status_is_cached_as_the_api_serves_it_back() {
    let mut cache = PodStatusCache::default();
    let pod = pod("Always", json!({"phase": "Pending"}));
    let started: Timestamp = "2026-12-04T18:53:51.123456789Z".parse().expect("time");
    let built = status(json!({
        "phase": "Running",
        "startTime": started,
        "containerStatuses": [
            {"name": "b", "image": "nginx", "imageID": "", "ready": true, "restartCount": 1,
             "state": {"running": {"startedAt": started}},
             "lastState": {"terminated": {"exitCode": 1, "startedAt": started, "finishedAt": started}}},
            {"name": "a", "image": "nginx", "imageID": "", "ready": false, "restartCount": 0}]
    }));
    cache.update(&pod, built, false, false, at(0));
    let whole = "2026-12-04T18:53:51Z";
    let served = status(json!({
        "phase": "Running",
        "startTime": whole,
        "containerStatuses": [
            {"name": "a", "image": "nginx", "imageID": "", "ready": false, "restartCount": 0,
             "state": {}, "lastState": {}},
            {"name": "b", "image": "nginx", "imageID": "", "ready": true, "restartCount": 1,
             "state": {"running": {"startedAt": whole}},
             "lastState": {"terminated": {"exitCode": 1, "startedAt": whole, "finishedAt": whole}}}]
    }));
    let cached = cache.get("uid-1").expect("cached");
    assert_eq!(PodStatus::clone(&cached.status.get()), served);
}
