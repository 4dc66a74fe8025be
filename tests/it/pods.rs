//! Pods bound to a simulated node, end to end through every actor of the node against an API
//! server (the emulator, or a real cluster with NODEPULSE_TEST_KUBECONFIG): bound pods become
//! Running with the kubelet's conditions and an address from the pod CIDR; readiness flips;
//! scripted exits end Succeeded/Failed; a deleted pod is terminated and then deleted with its
//! UID; a re-created pod is never written with its predecessor's status; the batch pass
//! repairs a status edited behind nodepulse's back without touching others' conditions;
//! eviction under pressure picks the pod the kubelet would and never a critical one; killing
//! the pod actors while pods arrive loses none of them; the pod lifecycle actor and the volume
//! manager follow one watch of the node's pods, also across their restarts.

use std::{
    collections::BTreeSet,
    net::IpAddr,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams},
};
use nodepulse_emulator::Verb;
use nodepulse_supervisor::{ChildState, KillMode, SupervisorHandle};
use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    eventually, eventually_async,
    pods::{
        condition, create, phase, pod_manifest, running_and_ready, start_simulated_node, wait_pod,
    },
};
use serde_json::json;

const NAMESPACE: &str = "default";

fn pods(cluster: &TestCluster, namespace: &str) -> Api<Pod> {
    Api::namespaced(cluster.client.clone(), namespace)
}

/// Whether `ip` lies in `cidr` (`a.b.c.d/n`, IPv4).
fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (network, prefix) = cidr.split_once('/').expect("a CIDR");
    let (Ok(IpAddr::V4(ip)), Ok(IpAddr::V4(network)), Ok(prefix)) = (
        ip.parse::<IpAddr>(),
        network.parse::<IpAddr>(),
        prefix.parse::<u32>(),
    ) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(network) & mask
}

/// A simulated node with one pod bound to it, Running and Ready.
struct OnePod {
    _supervisor: SupervisorHandle,
    node: String,
    name: String,
    pod: Pod,
}

async fn one_running_pod(cluster: &TestCluster, prefix: &str) -> OnePod {
    let node = unique_node_name(prefix);
    let _supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    let name = format!("{node}-pod");
    create(
        &cluster.client,
        &pod_manifest(&name, NAMESPACE, &node, json!({})),
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
    OnePod {
        _supervisor,
        node,
        name,
        pod,
    }
}

/// A pod whose only resources are pod-level (`spec.resources`) is Burstable, as the API server
/// computed at create; the node keeps that class in every status it writes (the API server
/// refuses a status with another: `status.qosClass: field is immutable`).
#[actix_rt::test]
async fn a_pod_with_pod_level_resources_keeps_the_qos_class_the_api_server_gave_it() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("pods-qos");
    let _supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    let name = format!("{node}-pod-level");
    let extra = json!({"spec": {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}});
    create(
        &cluster.client,
        &pod_manifest(&name, NAMESPACE, &node, extra),
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
    let status = pod.status.expect("a status");
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
}

#[actix_rt::test]
async fn bound_pods_become_running_with_the_kubelets_conditions_and_addresses() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("pods-running");
    let _supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    let names: Vec<String> = (0..3).map(|i| format!("{node}-{i}")).collect();
    for name in &names {
        create(
            &cluster.client,
            &pod_manifest(name, NAMESPACE, &node, json!({})),
        )
        .await;
    }
    let mut addresses = BTreeSet::new();
    for name in &names {
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
        for kind in [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "PodScheduled",
        ] {
            assert_eq!(
                condition(&pod, kind).as_deref(),
                Some("True"),
                "{name}: {kind}"
            );
        }
        let status = pod.status.clone().expect("a status");
        let ip = status.pod_ip.clone().expect("a pod IP");
        addresses.insert(ip.clone());
        let node = Api::<Node>::all(cluster.client.clone())
            .get(&node)
            .await
            .expect("the Node");
        let cidr = node
            .spec
            .and_then(|spec| spec.pod_cidr)
            .unwrap_or_else(|| "10.123.0.0/16".to_owned());
        assert!(in_cidr(&ip, &cidr), "{name}: {ip} is not in {cidr}");
        let internal_ip = node
            .status
            .and_then(|status| status.addresses)
            .into_iter()
            .flatten()
            .find(|address| address.type_ == "InternalIP")
            .map(|address| address.address);
        assert_eq!(
            status.host_ip, internal_ip,
            "{name}: hostIP is the node's InternalIP"
        );
        assert!(status.start_time.is_some(), "{name}: startTime");
        let container = &status.container_statuses.expect("container statuses")[0];
        assert!(
            container.ready
                && container
                    .state
                    .as_ref()
                    .is_some_and(|s| s.running.is_some())
        );
    }
    assert_eq!(
        addresses.len(),
        names.len(),
        "every pod has its own address: {addresses:?}"
    );
}

#[actix_rt::test]
async fn readiness_flips_with_the_containers_probe() {
    let cluster = TestCluster::start().await;
    let OnePod {
        _supervisor,
        node: _,
        name,
        pod: _,
    } = one_running_pod(&cluster, "pods-ready").await;

    let annotate = |value: serde_json::Value| {
        let pods = pods(&cluster, NAMESPACE);
        let name = name.clone();
        async move {
            let patch =
                json!({"metadata": {"annotations": {"nodepulse.io/simulated-unready": value}}});
            pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("annotated");
        }
    };
    annotate(json!("app")).await;
    let unready = wait_pod(&cluster.client, NAMESPACE, &name, "Ready=False", |pod| {
        condition(pod, "Ready").as_deref() == Some("False")
    })
    .await;
    assert_eq!(phase(&unready), Some("Running"));
    assert_eq!(
        condition(&unready, "ContainersReady").as_deref(),
        Some("False")
    );
    let ready_condition = unready
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready").cloned())
        .expect("Ready");
    assert_eq!(
        ready_condition.reason.as_deref(),
        Some("ContainersNotReady")
    );
    assert_eq!(
        ready_condition.message.as_deref(),
        Some("containers with unready status: [app]")
    );

    annotate(serde_json::Value::Null).await;
    wait_pod(
        &cluster.client,
        NAMESPACE,
        &name,
        "Ready again",
        running_and_ready,
    )
    .await;
}

#[actix_rt::test]
async fn scripted_exits_end_succeeded_or_failed() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("pods-exit");
    let _supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    for (suffix, code, phase_wanted) in [("ok", "0", "Succeeded"), ("bad", "2", "Failed")] {
        let name = format!("{node}-{suffix}");
        let extra = json!({
            "metadata": {"annotations": {"nodepulse.io/simulated-exit-code": code, "nodepulse.io/simulated-exit-after": "1"}},
            "spec": {"restartPolicy": "Never"},
        });
        create(
            &cluster.client,
            &pod_manifest(&name, NAMESPACE, &node, extra),
        )
        .await;
        let done = wait_pod(&cluster.client, NAMESPACE, &name, phase_wanted, |pod| {
            phase(pod) == Some(phase_wanted)
        })
        .await;
        let status = done.status.expect("a status");
        let terminated = status.container_statuses.clone().expect("containers")[0]
            .state
            .clone()
            .and_then(|state| state.terminated)
            .expect("terminated");
        assert_eq!(terminated.exit_code.to_string(), code);
        assert_eq!(
            condition(
                &Pod {
                    status: Some(status.clone()),
                    ..Pod::default()
                },
                "Ready"
            )
            .as_deref(),
            Some("False")
        );
    }
}

#[actix_rt::test]
async fn a_deleted_pod_is_terminated_then_deleted_with_its_uid() {
    let cluster = TestCluster::start().await;
    let OnePod {
        _supervisor,
        node: _,
        name,
        pod: running,
    } = one_running_pod(&cluster, "pods-delete").await;
    let uid = running.metadata.uid.clone().expect("a UID");

    let api = pods(&cluster, NAMESPACE);
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let version = running
        .metadata
        .resource_version
        .clone()
        .expect("a version");
    let mut watch = api.watch(&params, &version).await.expect("a watch").boxed();
    // A graceful delete: the API only marks the pod; nodepulse must finish and remove it.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete accepted");
    let mut seen_terminal_while_deleting = false;
    let deleted = tokio::time::timeout(PATIENCE, async {
        while let Some(event) = watch.try_next().await.expect("watch") {
            match event {
                WatchEvent::Modified(pod)
                    if pod.metadata.deletion_timestamp.is_some()
                        && matches!(phase(&pod), Some("Succeeded" | "Failed")) =>
                {
                    seen_terminal_while_deleting = true;
                }
                WatchEvent::Deleted(pod) => return Some(pod),
                _ => {}
            }
        }
        None
    })
    .await
    .expect("the pod is deleted in time")
    .expect("a DELETED event");
    assert_eq!(deleted.metadata.uid.as_deref(), Some(uid.as_str()));
    assert!(
        seen_terminal_while_deleting,
        "the pod ended terminal (its containers stopped) before it was deleted"
    );
}

#[actix_rt::test]
async fn a_recreated_pod_is_never_written_with_its_predecessors_status() {
    let cluster = TestCluster::start().await;
    let OnePod {
        _supervisor,
        node,
        name,
        pod: first,
    } = one_running_pod(&cluster, "pods-recreate").await;
    let old_uid = first.metadata.uid.clone().expect("uid");
    let api = pods(&cluster, NAMESPACE);
    api.delete(&name, &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    eventually_async("the first pod is gone", || async {
        api.get_opt(&name)
            .await
            .ok()
            .flatten()
            .is_none_or(|pod| pod.metadata.uid.as_deref() != Some(old_uid.as_str()))
    })
    .await;
    // The same name again, now exiting at once: its status must be its own.
    let extra = json!({
        "metadata": {"annotations": {"nodepulse.io/simulated-exit-code": "0"}},
        "spec": {"restartPolicy": "Never"},
    });
    let second = create(
        &cluster.client,
        &pod_manifest(&name, NAMESPACE, &node, extra),
    )
    .await;
    let new_uid = second.metadata.uid.clone().expect("uid");
    assert_ne!(new_uid, old_uid);
    let done = wait_pod(&cluster.client, NAMESPACE, &name, "Succeeded", |pod| {
        phase(pod) == Some("Succeeded")
    })
    .await;
    let ids: Vec<String> = done
        .status
        .and_then(|status| status.container_statuses)
        .into_iter()
        .flatten()
        .filter_map(|container| container.container_id)
        .collect();
    assert!(!ids.is_empty());
    assert!(
        ids.iter()
            .all(|id| id.contains(&new_uid) && !id.contains(&old_uid)),
        "container IDs {ids:?} belong to the new pod {new_uid}"
    );
}

#[actix_rt::test]
async fn the_batch_pass_repairs_a_status_edited_behind_our_back_and_keeps_others_conditions() {
    let cluster = TestCluster::start().await;
    let OnePod {
        _supervisor,
        node: _,
        name,
        pod: _,
    } = one_running_pod(&cluster, "pods-reconcile").await;

    // Someone else flips Ready (the kubelet's) and adds a condition of their own.
    let edit = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "Tampered"},
        {"type": "example.com/Gate", "status": "True", "reason": "Opened"},
    ]}});
    pods(&cluster, NAMESPACE)
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&edit))
        .await
        .expect("edited");
    let repaired = wait_pod(
        &cluster.client,
        NAMESPACE,
        &name,
        "Ready repaired by the batch pass",
        |pod| condition(pod, "Ready").as_deref() == Some("True"),
    )
    .await;
    assert_eq!(
        condition(&repaired, "example.com/Gate").as_deref(),
        Some("True"),
        "others' conditions are kept"
    );
}

/// Issue 29's storm: the API server serves a pod's status back in Go's form (`lastState: {}`,
/// no empty strings), which nodepulse once took for an edit at every batch pass, GETting and
/// PATCHing every settled pod every 10 s forever. A settled pod costs nothing over two passes.
#[actix_rt::test]
async fn a_settled_pod_costs_no_request_over_batch_passes() {
    let cluster = TestCluster::start().await;
    let OnePod {
        _supervisor: supervisor,
        node: _,
        name,
        pod: _,
    } = one_running_pod(&cluster, "pods-settled").await;
    nodepulse_testkit::settled::assert_settled(&cluster, &supervisor, &name).await;
}

/// A soft memory threshold every host meets (available below 99% of capacity), eligible for
/// eviction after 4 s — by then the node has listed every pod — and checked every 2 s. The
/// hard thresholds are never met (this host may be short of disk).
const UNDER_MEMORY_PRESSURE: &str = "evictionHard:
  memory.available: 1Mi
evictionSoft:
  memory.available: \"99%\"
evictionSoftGracePeriod:
  memory.available: 4s
housekeepingInterval: 2s
";

fn usage_pod(
    name: &str,
    namespace: &str,
    node: &str,
    request: Option<&str>,
    usage: &str,
    extra: serde_json::Value,
) -> Pod {
    let resources = request.map_or(
        json!({}),
        |request| json!({"requests": {"memory": request}}),
    );
    let mut pod = pod_manifest(
        name,
        namespace,
        node,
        json!({"metadata": {"annotations": {"nodepulse.io/simulated-memory-usage": usage}}}),
    );
    let spec = pod.spec.as_mut().expect("a spec");
    spec.containers[0].resources = Some(serde_json::from_value(resources).expect("resources"));
    if let Some(class) = extra.get("priorityClassName").and_then(|c| c.as_str()) {
        spec.priority_class_name = Some(class.to_owned());
    }
    pod
}

fn evicted(pod: &Pod) -> bool {
    phase(pod) == Some("Failed")
        && pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

#[actix_rt::test]
async fn eviction_under_pressure_takes_the_kubelets_pick_one_per_pass_and_never_a_critical_pod() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("pods-evict");
    // The pods exist before the node starts, so the first pass that evicts sees them all.
    let hog = format!("{node}-hog");
    let over = format!("{node}-over");
    let calm = format!("{node}-calm");
    let critical = format!("{node}-critical");
    for pod in [
        usage_pod(&hog, NAMESPACE, &node, Some("100Mi"), "400Mi", json!({})),
        usage_pod(&over, NAMESPACE, &node, Some("100Mi"), "200Mi", json!({})),
        usage_pod(&calm, NAMESPACE, &node, Some("500Mi"), "100Mi", json!({})),
        // System-critical priority is only admitted in kube-system on a real cluster.
        usage_pod(
            &critical,
            "kube-system",
            &node,
            None,
            "1Gi",
            json!({"priorityClassName": "system-node-critical"}),
        ),
    ] {
        create(&cluster.client, &pod).await;
    }
    let supervisor = start_simulated_node(&cluster.kubeconfig, &node, UNDER_MEMORY_PRESSURE).await;

    let api = pods(&cluster, NAMESPACE);
    let states = || async {
        let mut evicted_now = Vec::new();
        for name in [&hog, &over, &calm] {
            if api.get(name).await.is_ok_and(|pod| evicted(&pod)) {
                evicted_now.push(name.clone());
            }
        }
        evicted_now
    };
    let deadline = Instant::now() + PATIENCE;
    let first = loop {
        let evicted_now = states().await;
        if !evicted_now.is_empty() {
            break evicted_now;
        }
        assert!(
            Instant::now() < deadline,
            "no pod was evicted in {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        first,
        std::slice::from_ref(&hog),
        "the pod furthest over its request goes first"
    );
    eventually_async("three pods are evicted, one per pass", || async {
        states().await.len() == 3
    })
    .await;

    let hog_pod = api.get(&hog).await.expect("hog");
    let status = hog_pod.status.clone().expect("a status");
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: "),
        "{message}"
    );
    assert!(
        message.contains("Container app was using 400Mi, which exceeds its request of 100Mi. "),
        "{message}"
    );
    assert_eq!(
        condition(&hog_pod, "DisruptionTarget").as_deref(),
        Some("True")
    );
    let terminated = status.container_statuses.expect("containers")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("killed");
    assert_eq!(terminated.exit_code, 137);

    let events = Api::<Event>::namespaced(cluster.client.clone(), NAMESPACE);
    eventually_async("a Warning Evicted event for the hog", || async {
        events
            .list(&ListParams::default())
            .await
            .map(|list| {
                list.items.iter().any(|event| {
                    event.involved_object.name.as_deref() == Some(hog.as_str())
                        && event.reason.as_deref() == Some("Evicted")
                        && event.type_.as_deref() == Some("Warning")
                })
            })
            .unwrap_or(false)
    })
    .await;

    // Two more passes with only the critical pod left: it stays.
    let passes = || eviction_passes(&supervisor);
    let after_last = passes().await;
    eventually_async("two more eviction passes", || async {
        passes().await >= after_last + 2
    })
    .await;
    let critical_pod = pods(&cluster, "kube-system")
        .get(&critical)
        .await
        .expect("critical");
    assert!(
        running_and_ready(&critical_pod),
        "a critical pod is never evicted"
    );
}

#[actix_rt::test]
async fn killing_the_pod_actors_while_pods_arrive_loses_none() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("pods-kill");
    let supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    let names: Vec<String> = (0..60).map(|i| format!("{node}-{i}")).collect();
    let kills = [
        ("status-manager", KillMode::Panic),
        ("pod-lifecycle", KillMode::Stop),
        ("status-manager", KillMode::Hang),
        ("pod-lifecycle", KillMode::Hang),
        ("status-manager", KillMode::Stop),
        ("pod-lifecycle", KillMode::Panic),
    ];
    for (index, chunk) in names.chunks(10).enumerate() {
        let manifests: Vec<Pod> = chunk
            .iter()
            .map(|name| pod_manifest(name, NAMESPACE, &node, json!({})))
            .collect();
        futures::future::join_all(manifests.iter().map(|pod| create(&cluster.client, pod))).await;
        let (actor, mode) = kills[index];
        let before = supervisor.actor(actor).expect(actor).restarts;
        supervisor
            .kill(actor, mode)
            .await
            .expect("the kill is accepted");
        eventually("the killed actor runs again", || {
            supervisor.actor(actor).is_some_and(|snapshot| {
                snapshot.restarts > before && snapshot.state == ChildState::Running
            })
        })
        .await;
    }
    let api = pods(&cluster, NAMESPACE);
    let mut addresses = BTreeSet::new();
    for name in &names {
        let pod = wait_pod(
            &cluster.client,
            NAMESPACE,
            name,
            "Running after the kills",
            running_and_ready,
        )
        .await;
        addresses.insert(pod.status.and_then(|s| s.pod_ip).expect("an address"));
    }
    assert_eq!(addresses.len(), names.len(), "no address handed out twice");
    for actor in ["status-manager", "pod-lifecycle"] {
        let restarts = supervisor.actor(actor).expect(actor).restarts;
        assert!(
            restarts >= 3,
            "{actor} was restarted after each kill ({restarts})"
        );
    }
    drop(api);
}

#[actix_rt::test]
async fn a_quiet_node_keeps_its_watches_open() {
    let cluster = TestCluster::start().await;
    let Some(emulator) = cluster.emulator.as_ref() else {
        nodepulse_testkit::skip::skipped(
            "a_quiet_node_keeps_its_watches_open",
            "the emulator's request log to count watch requests",
        );
        return;
    };
    // A 1 s heartbeat timeout: a watch cut by it would be re-opened several times below.
    let supervisor = start_simulated_node(
        &cluster.kubeconfig,
        &unique_node_name("pods-quiet"),
        "nodeStatusUpdateFrequency: 1s\nhousekeepingInterval: 1s\n",
    )
    .await;
    let passes = || eviction_passes(&supervisor);
    eventually_async("six quiet seconds (six housekeeping passes)", || async {
        passes().await >= 6
    })
    .await;
    let watches = |resource: &str| {
        emulator
            .requests()
            .iter()
            .filter(|request| request.verb == Verb::Watch && request.resource == resource)
            .count()
    };
    assert_eq!(watches("nodes"), 1, "the Node watch was re-opened");
    // The pod lifecycle actor and the volume manager follow the node's one pod source.
    assert_eq!(watches("pods"), 1, "a pod watch was re-opened");
}

#[actix_rt::test]
async fn the_pod_actors_share_one_pod_watch_across_their_restarts() {
    let cluster = TestCluster::start().await;
    let Some(emulator) = cluster.emulator.as_ref() else {
        nodepulse_testkit::skip::skipped(
            "the_pod_actors_share_one_pod_watch_across_their_restarts",
            "the emulator's request log to count watch requests",
        );
        return;
    };
    let node = unique_node_name("pods-source");
    let supervisor = start_simulated_node(&cluster.kubeconfig, &node, "").await;
    let first = format!("{node}-before");
    create(
        &cluster.client,
        &pod_manifest(&first, NAMESPACE, &node, json!({})),
    )
    .await;
    wait_pod(
        &cluster.client,
        NAMESPACE,
        &first,
        "Running",
        running_and_ready,
    )
    .await;
    for actor in ["pod-lifecycle", "volume-manager"] {
        let before = supervisor.actor(actor).expect(actor).restarts;
        supervisor
            .kill(actor, KillMode::Stop)
            .await
            .expect("the kill is accepted");
        eventually("the killed actor runs again", || {
            supervisor.actor(actor).is_some_and(|snapshot| {
                snapshot.restarts > before && snapshot.state == ChildState::Running
            })
        })
        .await;
    }
    // The new instances hear of a pod bound after their restart, through the same source.
    let second = format!("{node}-after");
    create(
        &cluster.client,
        &pod_manifest(&second, NAMESPACE, &node, json!({})),
    )
    .await;
    wait_pod(
        &cluster.client,
        NAMESPACE,
        &second,
        "Running",
        running_and_ready,
    )
    .await;
    let pod_watches = emulator
        .requests()
        .iter()
        .filter(|request| request.verb == Verb::Watch && request.resource == "pods")
        .count();
    assert_eq!(
        pod_watches, 1,
        "one watch of the node's pods, never re-opened"
    );
}

/// Housekeeping passes EvictionSignalActor has made (from its debug state).
async fn eviction_passes(supervisor: &SupervisorHandle) -> u64 {
    supervisor
        .actor_state("eviction-signal", Duration::from_secs(5))
        .await
        .ok()
        .and_then(|state| state["passes"].as_u64())
        .unwrap_or(0)
}

/// An idle simulated node wakes neither its pod lifecycle actor (nothing is due: it sleeps
/// until its provider's next due time) nor its runtime probe (a simulated runtime is
/// reported once): over three housekeeping passes the probe is woken only by messages, and
/// the pod actor's timer never fires.
#[actix_rt::test]
async fn an_idle_simulated_node_wakes_neither_its_pod_timer_nor_its_runtime_probe() {
    let cluster = TestCluster::start().await;
    let supervisor = start_simulated_node(
        &cluster.kubeconfig,
        &unique_node_name("pods-idle"),
        "runtimeProbePeriod: 100ms\nhousekeepingInterval: 1s\n",
    )
    .await;
    let passes = || eviction_passes(&supervisor);
    eventually_async("a first housekeeping pass", || async {
        passes().await >= 1
    })
    .await;
    let probe = || supervisor.actor("runtime-probe").expect("supervised");
    let before = probe();
    let first = passes().await;
    eventually_async("three more housekeeping passes", || async {
        passes().await >= first + 3
    })
    .await;
    let after = probe();
    let woken =
        after.wakeups.expect("an instance runs") - before.wakeups.expect("an instance runs");
    let messages = after.mailbox.handled - before.mailbox.handled;
    assert!(
        woken <= messages,
        "the simulated runtime probe was woken {woken} times for {messages} messages (a 100 ms probe period would wake it ~30 times)"
    );
    let pod_state = supervisor
        .actor_state("pod-lifecycle", Duration::from_secs(5))
        .await
        .expect("the pod lifecycle actor answers");
    assert_eq!(pod_state["ticks"], 0, "{pod_state}");
    assert_eq!(
        pod_state["nextWakeup"],
        serde_json::Value::Null,
        "{pod_state}"
    );
}
