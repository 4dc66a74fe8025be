//! StatusManagerActor through the real kube-rs adapter against an API server (the emulator, or
//! a real cluster with NODEPULSE_TEST_KUBECONFIG): a status reaches the pod with the UID
//! precondition, a re-created pod is not touched by its predecessor's status, a terminated pod
//! being deleted is deleted with its UID, killing the actor (stop, panic, hang) in the middle
//! of a burst of status changes loses none of them, and the adapter's watch sees this node's
//! pods only. Two tests print figures: SetPodStatus → API latency and changes synced per second.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt, future::join_all};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::{
    Api,
    api::{DeleteParams, PostParams, WatchEvent, WatchParams},
};
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Source},
};
use nodepulse_actors::{
    kept_pod::KeptPod,
    messages::{SetPodStatus, TerminatePod},
    ports::{ApiError, PodApi, PodWatchEvent},
    status_manager::{PodStatusStore, StatusManagerActor, StatusManagerSettings},
};
use nodepulse_supervisor::{
    ChildSpec, Kept, KillMode, Mailbox, Supervisor, SupervisorConfig, SupervisorHandle, mailbox,
};
use nodepulse_testkit::{
    PATIENCE, cleanup,
    cluster::{TestCluster, unique_node_name},
    eventually_async,
};
use serde_json::json;

const NAMESPACE: &str = "default";
const ACTOR: &str = "status-manager";

struct Manager {
    supervisor: SupervisorHandle,
    mailbox: Mailbox<StatusManagerActor>,
    store: Kept<PodStatusStore>,
    api: Arc<KubeApi>,
}

async fn start_manager(cluster: &TestCluster, node: &str) -> Manager {
    start_manager_with(cluster, node, 4096).await
}

async fn start_manager_with(cluster: &TestCluster, node: &str, capacity: usize) -> Manager {
    let config = Config::parse("kubeAPIQPS: 50\nkubeAPIBurst: 100\n", Source::Embedded)
        .expect("a valid configuration");
    let api = KubeApi::connect(Some(&cluster.kubeconfig), &config)
        .await
        .expect("connects");
    let store = Kept::<PodStatusStore>::default();
    let (address, inbox) = mailbox::<StatusManagerActor>(capacity);
    let mut settings = StatusManagerSettings::new(node);
    settings.sync_period = Duration::from_secs(1);
    let (factory_api, factory_store) = (Arc::clone(&api), store.clone());
    // Quick restarts and a short liveness timeout, so a hang is noticed within a second.
    let mut supervision = SupervisorConfig::new(node);
    supervision.backoff.initial = Duration::from_millis(50);
    supervision.liveness_timeout = Duration::from_secs(1);
    supervision.liveness_interval = Duration::from_millis(100);
    let supervisor = Supervisor::builder(supervision)
        .child(ChildSpec::new(ACTOR, inbox, move || {
            StatusManagerActor::new(
                settings.clone(),
                Arc::clone(&factory_api) as Arc<dyn PodApi>,
                factory_store.clone(),
            )
        }))
        .start();
    Manager {
        supervisor,
        mailbox: address,
        store,
        api,
    }
}

fn pods(cluster: &TestCluster) -> Api<Pod> {
    Api::namespaced(cluster.client.clone(), NAMESPACE)
}

async fn create_pod(cluster: &TestCluster, name: &str, node: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"nodepulse.test/owner": "tests", cleanup::RUN_LABEL: cleanup::run_id()}},
        "spec": {"nodeName": node, "restartPolicy": "Always", "containers": [{"name": "app", "image": "nginx"}]},
    }))
    .expect("a pod");
    cleanup::own(cleanup::Owned::Pod {
        namespace: NAMESPACE.to_owned(),
        name: name.to_owned(),
    });
    pods(cluster)
        .create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created")
}

/// Running, every container ready, restarted `restarts` times: each value is another status.
/// A running status as a kubelet writes it: with the QoS class the API server gave the pod
/// (its pods set no resources), which a status may not change.
fn running(restarts: i32) -> PodStatus {
    serde_json::from_value(json!({
        "phase": "Running",
        "qosClass": "BestEffort",
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.7",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "containerID": "containerd://app",
            "ready": true, "started": true, "restartCount": restarts, "state": {"running": {}}}]
    }))
    .expect("a status")
}

fn restarts(pod: &Pod) -> Option<i32> {
    let status = pod.status.as_ref()?;
    (status.phase.as_deref() == Some("Running"))
        .then(|| {
            status
                .container_statuses
                .as_ref()?
                .first()
                .map(|c| c.restart_count)
        })
        .flatten()
}

fn ready(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// The provider's word on `pod`, kept as the watch keeps a pod version: one `KeptPod` each.
async fn set(manager: &Manager, pod: &KeptPod, status: PodStatus) {
    manager
        .mailbox
        .send(SetPodStatus {
            pod: pod.clone(),
            status,
        })
        .await
        .expect("queued");
}

#[actix_rt::test]
async fn a_running_status_reaches_the_pod_at_once_with_its_uid() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-running");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    let pod = create_pod(&cluster, &format!("{node}-web"), &node).await;
    let name = pod.metadata.name.clone().expect("name");

    let sent = Instant::now();
    set(&manager, &KeptPod::from(pod.clone()), running(0)).await;
    eventually_async("the API pod is Running and Ready", || async {
        pods(&cluster)
            .get(&name)
            .await
            .is_ok_and(|pod| restarts(&pod) == Some(0) && ready(&pod).as_deref() == Some("True"))
    })
    .await;
    eprintln!(
        "SetPodStatus → Running visible in the API: {:?}",
        sent.elapsed()
    );
    let live = pods(&cluster).get(&name).await.expect("pod");
    let status = live.status.expect("status");
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.7"));
    assert!(
        status.start_time.is_some(),
        "startTime is set on the first status"
    );
    assert_eq!(live.metadata.uid, pod.metadata.uid);
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn a_recreated_pod_is_not_touched_by_the_old_status() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-recreated");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    let name = format!("{node}-web");
    let old = create_pod(&cluster, &name, &node).await;
    let old_uid = old.metadata.uid.clone().expect("uid");
    pods(&cluster)
        .delete(&name, &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    let new = create_pod(&cluster, &name, &node).await;
    let new_uid = new.metadata.uid.clone().expect("uid");
    assert_ne!(old_uid, new_uid);

    // The adapter's own writes carry the precondition: both are refused for the old UID.
    let refused = manager
        .api
        .patch_pod_status(
            NAMESPACE,
            &name,
            json!({"metadata": {"uid": old_uid}, "status": {"phase": "Running"}}),
        )
        .await;
    assert!(refused.is_err(), "a patch for the old UID: {refused:?}");
    let refused = manager.api.delete_pod(NAMESPACE, &name, &old_uid).await;
    assert!(
        matches!(refused, Err(ApiError::Conflict(_))),
        "a delete for the old UID: {refused:?}"
    );

    set(&manager, &KeptPod::from(old.clone()), running(0)).await;
    eventually_async("the old status is dropped", || async {
        manager
            .store
            .read(|store| store.cache().get(&old_uid).is_none())
    })
    .await;
    let live = pods(&cluster)
        .get(&name)
        .await
        .expect("the new pod is there");
    assert_eq!(live.metadata.uid.as_deref(), Some(new_uid.as_str()));
    assert_eq!(
        restarts(&live),
        None,
        "the new pod was not given the old status"
    );

    // The new pod's own status goes through.
    set(&manager, &KeptPod::from(new.clone()), running(0)).await;
    eventually_async("the new pod is Running", || async {
        pods(&cluster)
            .get(&name)
            .await
            .is_ok_and(|pod| restarts(&pod) == Some(0))
    })
    .await;
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn a_terminated_pod_being_deleted_ends_failed_and_is_deleted_with_its_uid() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-terminate");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    let name = format!("{node}-web");
    let pod = create_pod(&cluster, &name, &node).await;
    set(&manager, &KeptPod::from(pod.clone()), running(0)).await;
    eventually_async("the pod is Running", || async {
        pods(&cluster)
            .get(&name)
            .await
            .is_ok_and(|pod| restarts(&pod) == Some(0))
    })
    .await;

    // A user deletes the pod: bound to a node, it only gets a deletionTimestamp.
    pods(&cluster)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("graceful delete");
    let deleting = pods(&cluster).get(&name).await.expect("still there");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let version = deleting
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");
    let mut events = pods(&cluster)
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            &version,
        )
        .await
        .expect("watch")
        .boxed();

    manager
        .mailbox
        .send(TerminatePod {
            pod: KeptPod::from(deleting),
        })
        .await
        .expect("queued");
    let mut final_status = None;
    let deleted = tokio::time::timeout(PATIENCE, async {
        while let Some(event) = events.next().await {
            match event.expect("watch event") {
                WatchEvent::Modified(pod) => final_status = pod.status,
                WatchEvent::Deleted(pod) => return pod,
                _ => {}
            }
        }
        panic!("the watch ended before the pod was deleted");
    })
    .await
    .expect("the pod is deleted in time");
    assert_eq!(deleted.metadata.uid, pod.metadata.uid);
    let status = final_status.expect("the final status was written before the delete");
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let container = &status.container_statuses.expect("containers")[0];
    let terminated = container
        .state
        .as_ref()
        .and_then(|state| state.terminated.as_ref())
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (137, Some("ContainerStatusUnknown"))
    );
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "False", "a terminal pod is not Ready");
    assert!(pods(&cluster).get_opt(&name).await.expect("get").is_none());
    cluster.delete_node(&node).await;
}

/// Sends `changes` rounds of a new status to every pod, killing the actor in the given ways
/// between rounds; returns when every pod shows the last one, with the time it took the
/// actor to send them all.
async fn burst(
    cluster: &TestCluster,
    manager: &Manager,
    all: &[Pod],
    changes: i32,
    kills: &[(i32, KillMode)],
) -> Duration {
    let kept: Vec<KeptPod> = all.iter().cloned().map(KeptPod::from).collect();
    let started = Instant::now();
    for round in 1..=changes {
        for pod in &kept {
            set(manager, pod, running(round)).await;
        }
        for (_, mode) in kills.iter().filter(|(after, _)| *after == round) {
            let restarts = || {
                manager
                    .supervisor
                    .actor(ACTOR)
                    .filter(|actor| actor.state.as_str() == "running")
                    .map_or(0, |actor| actor.restarts)
            };
            let before = restarts();
            manager
                .supervisor
                .kill(ACTOR, *mode)
                .await
                .expect("the kill is accepted");
            // The next kill must hit the next instance, not the one dying now; meanwhile the
            // statuses just sent wait in the cache and the mailbox.
            nodepulse_testkit::eventually(
                &format!("the actor is restarted after the {mode} kill"),
                || restarts() > before,
            )
            .await;
        }
    }
    // Cheap to poll: nothing queued, nothing the API lacks (the API check follows).
    nodepulse_testkit::eventually("every change is handled and sent", || {
        manager.mailbox.depth() == 0
            && manager
                .store
                .read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
    let took = started.elapsed();
    eventually_async("every pod shows its last status", || async {
        let checks = all.iter().map(|pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            async move {
                pods(cluster)
                    .get(&name)
                    .await
                    .is_ok_and(|pod| restarts(&pod) == Some(changes))
            }
        });
        join_all(checks).await.into_iter().all(|ok| ok)
    })
    .await;
    took
}

async fn create_pods(cluster: &TestCluster, node: &str, count: usize) -> Vec<Pod> {
    let names: Vec<String> = (0..count).map(|i| format!("{node}-p{i}")).collect();
    join_all(names.iter().map(|name| create_pod(cluster, name, node))).await
}

#[actix_rt::test]
async fn killing_the_actor_mid_burst_loses_no_status_change() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-kills");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    let all = create_pods(&cluster, &node, 50).await;
    let took = burst(
        &cluster,
        &manager,
        &all,
        10,
        &[
            (2, KillMode::Stop),
            (5, KillMode::Panic),
            (8, KillMode::Hang),
        ],
    )
    .await;
    eprintln!("50 pods × 10 changes with stop, panic and hang kills: all synced in {took:?}");
    assert!(
        manager
            .supervisor
            .actor(ACTOR)
            .is_some_and(|actor| actor.restarts >= 3),
        "the actor was restarted after each of the three kills"
    );
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn status_changes_per_second_synced_to_the_api() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-rate");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    // One change per pod, so none is coalesced: every change costs a GET and a PATCH.
    let all = create_pods(&cluster, &node, 500).await;
    let took = burst(&cluster, &manager, &all, 1, &[]).await;
    let state = manager
        .supervisor
        .actor_state(ACTOR, PATIENCE)
        .await
        .unwrap_or_default();
    let patches = state["counters"]["patches"].as_u64().unwrap_or_default();
    eprintln!(
        "500 status changes to 500 pods synced in {took:?}: {:.0} changes/s ({patches} PATCHes)",
        500.0 / took.as_secs_f64(),
    );
    assert_eq!(patches, 500, "one PATCH per change");
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn the_pod_watch_reports_this_nodes_pods_only() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-watch");
    let other = unique_node_name("sm-watch-other");
    cluster.create_node(&node).await;
    cluster.create_node(&other).await;
    let manager = start_manager(&cluster, &node).await;
    let events = manager.api.watch_pods(&node);
    let mine = create_pod(&cluster, &format!("{node}-mine"), &node).await;
    create_pod(&cluster, &format!("{other}-theirs"), &other).await;
    let name_of = |event: &PodWatchEvent| match event {
        PodWatchEvent::Applied(pod) | PodWatchEvent::Deleted(pod) => {
            pod.pod().metadata.name.clone().unwrap_or_default()
        }
        PodWatchEvent::Listed => String::new(),
    };
    // `Listed` only says a (re)list is complete; the pods are what this test is about.
    let mut events = events.filter(|event| std::future::ready(*event != PodWatchEvent::Listed));
    let first = tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("an event in time")
        .expect("the watch goes on");
    assert!(matches!(first, PodWatchEvent::Applied(_)), "{first:?}");
    assert_eq!(name_of(&first), format!("{node}-mine"));

    pods(&cluster)
        .delete(
            &format!("{node}-mine"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .expect("deleted");
    let deleted = tokio::time::timeout(PATIENCE, async {
        loop {
            let event = events.next().await.expect("the watch goes on");
            assert_eq!(
                name_of(&event),
                format!("{node}-mine"),
                "only this node's pods"
            );
            if let PodWatchEvent::Deleted(pod) = event {
                return pod;
            }
        }
    })
    .await
    .expect("the deletion is reported in time");
    assert_eq!(deleted.uid(), mine.metadata.uid.as_deref());
    cluster.delete_node(&node).await;
    cluster.delete_node(&other).await;
}

#[actix_rt::test]
async fn a_full_mailbox_only_slows_the_senders_down() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-flood");
    cluster.create_node(&node).await;
    // A mailbox of 8 for a burst of 500: senders wait for room, nothing deadlocks or is lost.
    let manager = start_manager_with(&cluster, &node, 8).await;
    let all = create_pods(&cluster, &node, 50).await;
    burst(&cluster, &manager, &all, 10, &[]).await;
    let snapshot = manager
        .supervisor
        .actor(ACTOR)
        .map(|actor| serde_json::to_value(actor).unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(
        snapshot["mailbox"]["highWater"], 8,
        "the mailbox did fill: {snapshot}"
    );
    assert_eq!(snapshot["handled"], 500, "{snapshot}");
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn set_pod_status_to_patch_latency() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("sm-latency");
    cluster.create_node(&node).await;
    let manager = start_manager(&cluster, &node).await;
    let name = format!("{node}-web");
    let pod = create_pod(&cluster, &name, &node).await;
    let version = pod
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion");
    let mut events = pods(&cluster)
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            &version,
        )
        .await
        .expect("watch")
        .boxed();
    let mut latencies = Vec::new();
    let kept = KeptPod::from(pod.clone());
    for change in 0..50 {
        let sent = Instant::now();
        set(&manager, &kept, running(change)).await;
        tokio::time::timeout(PATIENCE, async {
            while let Some(event) = events.next().await {
                if let Ok(WatchEvent::Modified(seen)) = event
                    && restarts(&seen) == Some(change)
                {
                    return;
                }
            }
            panic!("the watch ended");
        })
        .await
        .expect("the change is seen in time");
        latencies.push(sent.elapsed());
    }
    latencies.sort();
    eprintln!(
        "SetPodStatus → PATCH seen by a watch, 50 sequential changes: p50 {:?}, p90 {:?}, max {:?}",
        latencies[25], latencies[45], latencies[49]
    );
    assert!(
        latencies[25] < Duration::from_secs(1),
        "a change is sent at once, not on the batch pass"
    );
    cluster.delete_node(&node).await;
}
