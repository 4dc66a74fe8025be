//! The simulated provider as a pure state machine: what each pod event, tick and eviction
//! turns into.

use crate::kept_pod::KeptPod;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};

use super::{
    PodLifecycleProvider, PodUpdate, SimulatedPods, SimulatedSettings, annotations, ip_pool::Cidr,
};
use crate::{messages::StopPod, volume_manager::ports::fakes::view::OneVolume};

fn provider() -> SimulatedPods {
    SimulatedPods::new(SimulatedSettings {
        host_ip: Some("192.168.1.10".parse().unwrap()),
        fallback_cidr: Cidr::parse("10.88.0.0/16").unwrap(),
    })
}

fn pod(uid: &str, restart_policy: &str, annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{uid}"), "namespace": "default", "uid": uid, "annotations": annotations},
        "spec": {"nodeName": "worker-1", "restartPolicy": restart_policy,
                 "containers": [{"name": "app", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}]},
    }))
    .expect("a pod")
}

fn now() -> Timestamp {
    "2026-11-29T10:00:00Z".parse().unwrap()
}

fn statuses(updates: &[PodUpdate]) -> Vec<Value> {
    updates
        .iter()
        .filter_map(|update| match update {
            PodUpdate::Status { status, .. } => Some(serde_json::to_value(status).unwrap()),
            _ => None,
        })
        .collect()
}

fn terminated_count(updates: &[PodUpdate]) -> usize {
    updates
        .iter()
        .filter(|update| matches!(update, PodUpdate::Terminated { .. }))
        .count()
}

fn condition(status: &Value, kind: &str) -> String {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[test]
fn a_bound_pod_goes_pending_then_running_with_an_address_from_the_pod_cidr() {
    let mut pods = provider();
    assert!(
        pods.set_pod_cidrs("10.244.1.0/24,fd00::/64", now())
            .is_empty()
    );
    let updates = pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let statuses = statuses(&updates);
    assert_eq!(statuses.len(), 2, "{statuses:#?}");
    let (pending, running) = (&statuses[0], &statuses[1]);
    assert_eq!(pending["phase"], "Pending");
    assert_eq!(
        pending["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert_eq!(pending.get("podIP"), None);
    assert_eq!(running["phase"], "Running");
    assert_eq!(running["podIP"], "10.244.1.2");
    assert_eq!(running["hostIP"], "192.168.1.10");
    assert_eq!(running["startTime"], "2026-11-29T10:00:00Z");
    assert_eq!(running["qosClass"], "BestEffort");
    for kind in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ] {
        assert_eq!(condition(running, kind), "True", "{kind}");
    }
    let names: Vec<&str> = running["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);
    assert!(running["containerStatuses"][0]["ready"].as_bool().unwrap());
}

#[test]
fn addresses_are_not_reused_while_held_and_are_given_back() {
    let mut pods = provider();
    pods.set_pod_cidrs("10.244.1.0/24", now());
    let ip = |updates: &[PodUpdate]| statuses(updates).last().unwrap()["podIP"].clone();
    let first = pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let second = pods.pod_applied(&KeptPod::from(pod("b", "Always", json!({}))), now());
    assert_eq!(
        (ip(&first), ip(&second)),
        (json!("10.244.1.2"), json!("10.244.1.3"))
    );
    pods.pod_deleted(&pod("a", "Always", json!({})));
    let third = pods.pod_applied(&KeptPod::from(pod("c", "Always", json!({}))), now());
    assert_eq!(ip(&third), json!("10.244.1.2"));
}

#[test]
fn a_pod_already_running_in_the_api_is_adopted_with_its_address() {
    let mut pods = provider();
    let mut running = pod("a", "Always", json!({}));
    running.status = Some(
        serde_json::from_value::<PodStatus>(
            json!({"phase": "Running", "podIP": "10.88.0.9", "startTime": "2026-11-29T09:00:00Z"}),
        )
        .unwrap(),
    );
    let updates = pods.pod_applied(&KeptPod::from(running.clone()), now());
    let statuses = statuses(&updates);
    assert_eq!(statuses.len(), 1, "no Pending again");
    assert_eq!(statuses[0]["podIP"], "10.88.0.9");
    assert_eq!(statuses[0]["startTime"], "2026-11-29T09:00:00Z");
    let next = pods.pod_applied(&KeptPod::from(pod("b", "Always", json!({}))), now());
    assert_ne!(
        statuses_last_ip(&next),
        "10.88.0.9",
        "the adopted address is taken"
    );
}

fn statuses_last_ip(updates: &[PodUpdate]) -> String {
    statuses(updates).last().unwrap()["podIP"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_scripted_exit_ends_the_pod_when_due() {
    let mut pods = provider();
    let failing = pod(
        "a",
        "Never",
        json!({annotations::EXIT_CODE: "3", annotations::EXIT_AFTER: "10"}),
    );
    let updates = pods.pod_applied(&KeptPod::from(failing.clone()), now());
    assert_eq!(statuses(&updates).last().unwrap()["phase"], "Running");
    assert!(
        pods.tick(
            now()
                .checked_add(jiff::SignedDuration::from_secs(9))
                .unwrap()
        )
        .is_empty()
    );
    let done = pods.tick(
        now()
            .checked_add(jiff::SignedDuration::from_secs(10))
            .unwrap(),
    );
    let last = statuses(&done).pop().unwrap();
    assert_eq!(last["phase"], "Failed");
    assert_eq!(
        last["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(
        last["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Error"
    );
    assert_eq!(condition(&last, "Ready"), "False");
    assert_eq!(terminated_count(&done), 1);

    let succeeding = pod("b", "Never", json!({annotations::EXIT_CODE: "0"}));
    let at_once = pods.pod_applied(&KeptPod::from(succeeding.clone()), now());
    assert_eq!(statuses(&at_once).last().unwrap()["phase"], "Succeeded");
}

#[test]
fn a_deleted_pod_is_stopped_and_terminated_once() {
    let mut pods = provider();
    pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let mut deleting = pod("a", "Always", json!({}));
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let updates = pods.pod_applied(&KeptPod::from(deleting.clone()), now());
    assert_eq!(statuses(&updates).last().unwrap()["phase"], "Succeeded");
    assert_eq!(terminated_count(&updates), 1);
    let again = pods.pod_applied(&KeptPod::from(deleting.clone()), now());
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn an_evicted_pod_is_killed_and_fails_with_the_eviction_reason() {
    let mut pods = provider();
    pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let stop = StopPod {
        uid: "a".into(),
        reason: "Evicted".into(),
        message: "The node was low on resource: memory. ".into(),
    };
    let updates = pods.stop_pod(&stop, now());
    let last = statuses(&updates).pop().unwrap();
    assert_eq!(last["phase"], "Failed");
    assert_eq!(last["reason"], "Evicted");
    assert_eq!(last["message"], "The node was low on resource: memory. ");
    assert_eq!(
        last["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
    assert_eq!(condition(&last, "DisruptionTarget"), "True");
    assert_eq!(terminated_count(&updates), 1);
    assert!(
        pods.active_pods().is_empty(),
        "an evicted pod is no longer active"
    );
}

#[test]
fn the_unready_annotation_flips_readiness() {
    let mut pods = provider();
    pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let updates = pods.pod_applied(
        &KeptPod::from(pod("a", "Always", json!({annotations::UNREADY: "sidecar"}))),
        now(),
    );
    assert_eq!(
        updates,
        vec![PodUpdate::Readiness {
            pod_uid: "a".into(),
            container_id: "simulated://a-sidecar".into(),
            ready: false
        }]
    );
    let back = pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    assert!(matches!(
        back.as_slice(),
        [PodUpdate::Readiness { ready: true, .. }]
    ));
}

#[test]
fn a_spec_update_resends_the_status_observing_the_new_generation() {
    let mut pods = provider();
    let at = |generation: i64| {
        let mut pod = pod("a", "Always", json!({}));
        pod.metadata.generation = Some(generation);
        KeptPod::from(pod)
    };
    let first = statuses(&pods.pod_applied(&at(1), now()));
    assert!(
        first.iter().all(|status| status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["observedGeneration"] == 1)),
        "{first:?}"
    );
    assert!(
        statuses(&pods.pod_applied(&at(1), now())).is_empty(),
        "a metadata update of a running pod sends nothing"
    );
    let respec = statuses(&pods.pod_applied(&at(2), now()));
    assert_eq!(respec.len(), 1, "{respec:?}");
    let conditions = respec[0]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 5);
    assert!(
        conditions.iter().all(|c| c["observedGeneration"] == 2),
        "{conditions:?}"
    );
}

#[test]
fn active_pods_carry_the_annotated_usage() {
    let mut pods = provider();
    pods.pod_applied(
        &KeptPod::from(pod(
            "a",
            "Always",
            json!({annotations::MEMORY_USAGE: "300Mi", annotations::PROCESSES: "12"}),
        )),
        now(),
    );
    let active = pods.active_pods();
    let containers = active[0].containers.clone().unwrap();
    assert_eq!(containers[0].memory_bytes, 300 << 20);
    assert_eq!(containers[1].memory_bytes, 0);
    assert_eq!(active[0].processes, Some(12));
}

#[test]
fn nothing_is_due_without_pods_or_scripts_and_a_scripted_exit_is_due_at_its_time() {
    let mut pods = provider();
    assert_eq!(pods.next_wakeup(), None, "no pods: never woken");
    pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    assert_eq!(pods.next_wakeup(), None, "a running pod without a script");
    let scripted = pod(
        "b",
        "Never",
        json!({annotations::EXIT_CODE: "0", annotations::EXIT_AFTER: "5"}),
    );
    pods.pod_applied(&KeptPod::from(scripted.clone()), now());
    let exit = now()
        .checked_add(jiff::SignedDuration::from_secs(5))
        .unwrap();
    assert_eq!(pods.next_wakeup(), Some(exit));
    let done = pods.tick(exit);
    assert_eq!(statuses(&done).last().unwrap()["phase"], "Succeeded");
    assert_eq!(pods.next_wakeup(), None, "finished: nothing more is due");
}

#[test]
fn a_pod_waiting_for_an_address_is_due_once_one_is_freed() {
    let mut pods = provider();
    // A /30 holds one pod address (.2; .3 is the broadcast address).
    pods.set_pod_cidrs("10.244.9.0/30", now());
    pods.pod_applied(&KeptPod::from(pod("a", "Always", json!({}))), now());
    let waiting = pods.pod_applied(&KeptPod::from(pod("b", "Always", json!({}))), now());
    assert!(statuses(&waiting).iter().all(|s| s["phase"] == "Pending"));
    assert_eq!(
        pods.next_wakeup(),
        None,
        "no free address: wait for an event"
    );
    pods.pod_deleted(&pod("a", "Always", json!({})));
    let due = pods.next_wakeup().expect("an address is free: due");
    assert!(due <= now(), "at once");
    let placed = pods.tick(now());
    assert_eq!(statuses(&placed).last().unwrap()["podIP"], "10.244.9.2");
    assert_eq!(pods.next_wakeup(), None);
}

#[test]
fn deleted_pods_leave_nothing_behind() {
    let mut pods = provider();
    let applied: Vec<KeptPod> = (0..40)
        .map(|index| KeptPod::from(pod(&format!("p{index}"), "Always", json!({}))))
        .collect();
    for pod in &applied {
        pods.pod_applied(pod, now());
    }
    assert_eq!(pods.footprint().2, applied.len(), "each has an address");
    for pod in &applied {
        pods.pod_deleted(&pod.pod());
    }
    assert_eq!(pods.footprint(), (0, 0, 0), "pods, table slots, addresses");
}

#[test]
fn a_pod_waiting_for_its_volumes_is_not_due_until_they_are_set_up() {
    let volumes = Arc::new(OneVolume::default());
    let mut pods = provider().with_volumes(Arc::clone(&volumes) as _);
    let mut with_volume = pod("a", "Always", json!({}));
    with_volume.spec.as_mut().unwrap().volumes = Some(vec![
        serde_json::from_value(json!({"name": "data", "emptyDir": {}})).unwrap(),
    ]);
    let waiting = pods.pod_applied(&KeptPod::from(with_volume), now());
    assert!(statuses(&waiting).iter().all(|s| s["phase"] == "Pending"));
    assert_eq!(
        pods.next_wakeup(),
        None,
        "an address is free, but the volumes are not set up: wait for the volume manager"
    );
    assert!(
        statuses(&pods.tick(now())).is_empty(),
        "a tick changes nothing"
    );
    volumes.set_up();
    let started = pods.volumes_changed("a", now());
    assert_eq!(statuses(&started).last().unwrap()["phase"], "Running");
    assert_eq!(pods.next_wakeup(), None);
}
