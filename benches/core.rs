//! Micro benchmarks of nodepulse's pure cores, the work done per heartbeat or per pod change:
//! computing a Node's status from its inputs, the strategic-merge diff of two Nodes, building
//! and serialising a Lease renewal, merging and diffing a pod status, and the volume manager's
//! pass over settled pods.
//! `cargo bench --bench core`; figures in docs/benchmarks/one-node.md, "Pure cores".

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, PodStatus},
};
use nodepulse::apiserver_client::lease::renewal_patch;
use nodepulse_actors::volume_manager::{
    REMOUNT_PERIOD, VolumeManagerMemory, reconcile, volumes_in_use,
};
use nodepulse_actors::{
    eviction::ThresholdValue,
    lease::renewal_of,
    messages::RuntimeHealth,
    node_status::{
        change::status_changed,
        patch::status_patch,
        setters::{StatusInputs, StatusSettings, run_setters},
    },
    ports::MachineInfo,
    status_manager::{merge::merge_pod_status, patch::pod_status_patch},
};
use serde_json::json;

fn machine() -> MachineInfo {
    MachineInfo {
        hostname: "ip-10-0-113-214.eu-west-1.compute.internal".into(),
        cpu_cores: 4,
        memory_bytes: 16 << 30,
        machine_id: "ec2a5e1f0b3c4d5e6f708192a3b4c5d6".into(),
        system_uuid: "ec2a5e1f-0b3c-4d5e-6f70-8192a3b4c5d6".into(),
        boot_id: "b4b42049-2765-4039-8999-d201942bc082".into(),
        kernel_version: "6.8.0-1019-aws".into(),
        os_image: "Ubuntu 24.04.1 LTS".into(),
        ephemeral_storage_bytes: Some(100 << 30),
        local_addresses: vec!["10.0.113.214".parse().expect("ip")],
        default_route_address: Some("10.0.113.214".parse().expect("ip")),
    }
}

fn settings() -> StatusSettings {
    StatusSettings {
        max_pods: 110,
        pods_per_core: 0,
        reserved: Default::default(),
        hard_eviction_memory: Some(ThresholdValue::Quantity(100 << 20)),
        hard_eviction_nodefs: Some(ThresholdValue::Percentage(10.0)),
        node_ips: Vec::new(),
        port: 10250,
        agent_version: "v0.1.0".into(),
        runtime_down_after: std::time::Duration::from_secs(30),
    }
}

fn runtime() -> RuntimeHealth {
    RuntimeHealth {
        last_successful_probe: Some(tokio::time::Instant::now()),
        runtime_error: None,
        network_error: None,
        runtime_version: Some("containerd://1.7.13".into()),
        observed_at: Timestamp::UNIX_EPOCH,
        simulated: false,
        images: Vec::new(),
        capabilities: Default::default(),
    }
}

fn node_status(c: &mut Criterion) {
    let (machine, settings, runtime) = (machine(), settings(), runtime());
    let inputs = StatusInputs {
        volumes_in_use: None,
        node_name: "ip-10-0-113-214.eu-west-1.compute.internal",
        machine: &machine,
        settings: &settings,
        runtime: Some(&runtime),
        pressure: None,
        previous_boot_id: None,
        now_instant: tokio::time::Instant::now(),
        health: &[],
    };
    let t0 = Timestamp::from_second(1_800_000_000).expect("time");
    let mut before = Node::default();
    run_setters(&inputs, t0, &mut before);
    c.bench_function("node status: run the setters on a registered Node", |b| {
        b.iter(|| {
            let mut node = before.clone();
            run_setters(black_box(&inputs), t0, &mut node);
            node
        });
    });
    let mut after = before.clone();
    run_setters(
        &inputs,
        Timestamp::from_second(1_800_000_300).expect("time"),
        &mut after,
    );
    c.bench_function("node status: change detection (heartbeat only)", |b| {
        b.iter(|| {
            status_changed(
                black_box(before.status.as_ref()),
                after.status.as_ref().expect("status"),
            )
        });
    });
    c.bench_function("node status: strategic-merge diff of two Nodes", |b| {
        b.iter(|| status_patch(black_box(&before), black_box(&after)));
    });
}

fn lease(c: &mut Criterion) {
    let base: Lease = serde_json::from_value(json!({
        "metadata": {"name": "ip-10-0-113-214.eu-west-1.compute.internal", "namespace": "kube-node-lease",
                     "resourceVersion": "184467", "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                     "name": "ip-10-0-113-214.eu-west-1.compute.internal", "uid": "8d3a5f0e-3a8e-4d6c-9f1e-7b2c4a6d8e0f"}]},
        "spec": {"holderIdentity": "ip-10-0-113-214.eu-west-1.compute.internal", "leaseDurationSeconds": 40,
                 "renewTime": "2026-11-29T10:00:00.000000Z"},
    }))
    .expect("a lease");
    let now = Timestamp::from_second(1_800_000_010).expect("time");
    c.bench_function("lease: build and serialise a renewal", |b| {
        b.iter(|| {
            let renewal = renewal_of(black_box(&base), 40, now, None).expect("a renewal");
            serde_json::to_vec(&renewal_patch(&renewal)).expect("json")
        });
    });
}

fn pod_status(c: &mut Criterion) {
    let status = |ready: &str| -> PodStatus {
        serde_json::from_value(json!({
            "phase": "Running", "hostIP": "10.0.113.214", "podIP": "10.244.1.7", "qosClass": "Burstable",
            "startTime": "2026-11-29T10:00:00Z",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-11-29T10:00:01Z"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-29T10:00:00Z"},
                {"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-29T10:00:03Z"},
                {"type": "ContainersReady", "status": ready, "lastTransitionTime": "2026-11-29T10:00:03Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-29T10:00:00Z"},
                {"type": "example.com/gate", "status": "True", "lastTransitionTime": "2026-11-29T10:00:00Z"}],
            "containerStatuses": [
                {"name": "app", "image": "nginx:1.27", "imageID": "docker.io/library/nginx@sha256:0123", "containerID": "containerd://0a1b",
                 "ready": ready == "True", "started": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-29T10:00:02Z"}}},
                {"name": "sidecar", "image": "envoy:1.31", "imageID": "docker.io/envoyproxy/envoy@sha256:4567", "containerID": "containerd://2c3d",
                 "ready": true, "started": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-29T10:00:02Z"}}}]
        }))
        .expect("a status")
    };
    let (api, cached) = (status("True"), status("False"));
    let now = Timestamp::from_second(1_800_000_000).expect("time");
    c.bench_function(
        "pod status: merge with the API's and diff (readiness flip)",
        |b| {
            b.iter(|| {
                let merged = merge_pod_status(black_box(&api), black_box(&cached), true, now);
                pod_status_patch("8d3a5f0e", &api, &merged)
            });
        },
    );
}

/// A pod as admission leaves it: one container and the `kube-api-access` projected volume
/// (token, the cluster CA, the namespace), bound to `node`.
fn admitted_pod(index: usize, node: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("app-{index}"), "namespace": "default", "uid": format!("uid-{index:04}")},
        "spec": {
            "nodeName": node, "serviceAccountName": "default",
            "containers": [{"name": "app", "image": "busybox", "volumeMounts": [
                {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}]
        },
        "status": {"phase": "Running"}
    }))
    .expect("a pod")
}

/// What a reconciler pass computes when nothing changed: 100 running pods, every volume set up
/// moments ago, so no operation is due. A projected volume's refresh wakes this pass for each
/// pod at its own time, so it runs a few times a second on such a node.
fn volume_pass(c: &mut Criterion) {
    let node = "ip-10-0-113-214";
    let now = tokio::time::Instant::now();
    let mut memory = VolumeManagerMemory {
        listed: true,
        ..Default::default()
    };
    for index in 0..100 {
        let pod = nodepulse_actors::kept_pod::KeptPod::from(admitted_pod(index, node));
        let uid = pod.uid().expect("uid").to_owned();
        memory.pods.insert(uid, pod);
    }
    let desired = memory.desired(node);
    for (uid, pod) in &desired.pods {
        for volume in pod.volumes.values() {
            memory.actual.mark_mounted(uid, volume, now);
        }
    }
    let attached = Default::default();
    c.bench_function("volume manager: a pass over 100 settled pods", |b| {
        b.iter(|| {
            let desired = memory.desired(black_box(node));
            let operations = reconcile(&desired, &memory.actual, &attached, now, REMOUNT_PERIOD);
            assert!(operations.is_empty(), "nothing is due: {operations:?}");
            volumes_in_use(&desired, &memory.actual, true)
        });
    });
}

criterion_group!(benches, node_status, lease, pod_status, volume_pass);
criterion_main!(benches);
