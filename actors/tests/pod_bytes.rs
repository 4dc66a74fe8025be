//! What a simulated pod costs the simulated provider and StatusManager's status cache beyond
//! the watch's one shared Pod, counted by a counting allocator (deterministic, not timed): a
//! part that copies the Pod again (several KiB) breaks the bound, and deleting every pod gives
//! back all of it; and what the volume manager's kept desired state costs a pod. Its own test
//! binary with one test, so nothing else allocates while it counts: with two, the harness
//! records the first one's result while the second counts.
#![allow(unsafe_code)] // A global allocator is an `unsafe impl`; this one counts and forwards to System.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::{
        Arc,
        atomic::{AtomicIsize, Ordering},
    },
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use nodepulse_actors::{
    kept_pod::{self, KeptPod},
    pods::{PodLifecycleProvider, PodUpdate, SimulatedPods, SimulatedSettings, ip_pool::Cidr},
    status_manager::cache::PodStatusCache,
    volume_manager::VolumeManagerMemory,
};
use serde_json::json;

static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator that made it.
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator that made it.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// A pod as the emulator serves the bench's: one container, the service-account volume.
fn pod(index: usize) -> KeptPod {
    KeptPod::new(Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": format!("bench-pod-{index}"), "namespace": "default",
                         "uid": format!("8b0c1a52-0000-4000-8000-{index:012}"),
                         "labels": {"bench": "pods"}, "resourceVersion": "8386"},
            "spec": {"nodeName": "pods-0", "restartPolicy": "Always", "serviceAccountName": "default",
                     "containers": [{"name": "app", "image": "pause", "volumeMounts": [
                         {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "name": "kube-api-access-282j9", "readOnly": true}]}],
                     "volumes": [{"name": "kube-api-access-282j9", "projected": {"sources": [
                         {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                         {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
            "status": {"phase": "Pending"},
        }))
        .expect("a pod"),
    ))
}

const PODS: usize = 200;
/// What one pod may cost beyond its shared Pod: its cached status (a `PodStatus` with five
/// conditions and a container status) and the provider's record, measured at about 3 KiB.
const BOUND_PER_POD: isize = 4 * 1024;

/// The pod through the provider into the cache, as PodLifecycleActor and StatusManager do.
fn apply(provider: &mut SimulatedPods, cache: &mut PodStatusCache, pod: &KeptPod, now: Timestamp) {
    for update in provider.pod_applied(pod, now) {
        if let PodUpdate::Status { pod, status } = update {
            cache.update(&pod.pod(), *status, false, false, now);
        }
    }
}

/// The pod deleted, as the watch's DELETED event makes them forget it.
fn delete(provider: &mut SimulatedPods, cache: &mut PodStatusCache, pod: &KeptPod) {
    provider.pod_deleted(&pod.pod());
    cache.remove(pod.uid().expect("a uid"));
}

#[test]
fn a_pod_costs_the_parts_that_keep_it_a_few_kib_and_nothing_once_deleted() {
    let (per_pod, settled, cooled) =
        a_simulated_pod_costs_its_status_and_record_and_nothing_once_deleted();
    let desired = the_volume_managers_desired_state_of_a_pod_is_small_and_given_back();
    the_volume_manager_keeps_nothing_of_pods_torn_down();
    // Printed last: a captured print allocates, and the test harness keeps what it captured.
    eprintln!(
        "a simulated pod: {per_pod} bytes, {settled} once settled, {cooled} in all once unread; the desired state: {desired} bytes a pod"
    );
}

/// What a pod costs beyond its shared Pod, once its status is settled, and in all (the pod
/// included) once nothing reads it.
fn a_simulated_pod_costs_its_status_and_record_and_nothing_once_deleted() -> (isize, isize, isize) {
    let now: Timestamp = "2026-12-02T00:00:00Z".parse().expect("a time");
    let before_pods = live();
    let pods: Vec<KeptPod> = (0..PODS).map(pod).collect();
    let pods_bytes = live() - before_pods;
    let mut provider = SimulatedPods::new(SimulatedSettings {
        host_ip: Some("192.0.2.2".parse().expect("an address")),
        fallback_cidr: Cidr::parse("10.88.0.0/16").expect("a CIDR"),
    });
    let mut cache = PodStatusCache::default();
    // One pod through first: what is set up once (logging's call sites, ...) is not a pod's.
    let warm_up = pod(PODS);
    apply(&mut provider, &mut cache, &warm_up, now);
    delete(&mut provider, &mut cache, &warm_up);
    let start = live();
    for pod in &pods {
        apply(&mut provider, &mut cache, pod, now);
    }
    let per_pod = (live() - start) / PODS as isize;
    assert!(
        per_pod <= BOUND_PER_POD,
        "{per_pod} bytes a pod (bound {BOUND_PER_POD}): a part copies the Pod?"
    );
    // The API takes each status, and the watch reports the pod with it: the watch's new
    // version replaces the old one, and the cache holds its status as that pod's.
    let before_settled = live();
    let settled: Vec<KeptPod> = pods
        .iter()
        .map(|pod| as_the_api_has_it(pod, &cache))
        .collect();
    let settled_bytes = live() - before_settled;
    let before = live();
    for (old, new) in pods.iter().zip(&settled) {
        let uid = new.uid().expect("a uid");
        apply(&mut provider, &mut cache, new, now);
        cache.observed(uid, new);
        assert_eq!(old.holders(), 1, "{uid}: the older version is let go");
    }
    assert!(live() < before, "the settled statuses freed their copies");
    drop(pods);
    // Beyond the pods, now the settled versions in place of the first ones.
    let settled_per_pod = (live() - start + pods_bytes - settled_bytes) / PODS as isize;
    assert!(
        settled_per_pod <= SETTLED_BOUND_PER_POD,
        "{settled_per_pod} bytes a settled pod (bound {SETTLED_BOUND_PER_POD}): the cache keeps a status the API's pod has?"
    );
    // Nothing reads the settled pods for two passes: each part's share and the pod's JSON
    // stay, the decoded pods go.
    kept_pod::cool();
    kept_pod::cool();
    assert!(
        settled.iter().all(|pod| !pod.is_decoded()),
        "a settled pod nobody reads is kept as its JSON"
    );
    // Everything since the first pods were made: what a pod costs in all.
    let cooled_per_pod = (live() - start + pods_bytes) / PODS as isize;
    assert!(
        cooled_per_pod <= COOLED_BOUND_PER_POD,
        "{cooled_per_pod} bytes a settled pod nobody reads, the pod included (bound {COOLED_BOUND_PER_POD}): a part holds it decoded?"
    );
    for pod in &settled {
        delete(&mut provider, &mut cache, pod);
    }
    drop(settled);
    // The next pass lets go of the list entries the pods had while decoded.
    kept_pod::cool();
    let left = live() - start + pods_bytes;
    assert!(
        left <= 0,
        "{left} bytes still held after every pod was deleted"
    );
    (per_pod, settled_per_pod, cooled_per_pod)
}

/// What a settled pod nobody reads costs in all: its packed JSON (2.4 KiB as JSON, a few hundred
/// bytes packed), the provider's record and the cache entry; measured at 1,084 bytes, where the
/// plain JSON made it 2,270. Its decoded Pod alone was about 12 KiB.
const COOLED_BOUND_PER_POD: isize = 1536;

/// What a settled pod may cost beyond its shared Pod: the provider's record and the cache
/// entry without a status of its own, measured at about 0.5 KiB.
const SETTLED_BOUND_PER_POD: isize = 1024;

/// `pod` as the API serves it once its cached status was PATCHed.
fn as_the_api_has_it(pod: &KeptPod, cache: &PodStatusCache) -> KeptPod {
    let uid = pod.uid().expect("a uid");
    let status = cache.get(uid).expect("a cached status").status.get();
    let mut served = Pod::clone(&pod.pod());
    served.status = Some(PodStatus::clone(&status));
    drop(status);
    KeptPod::from(served)
}

/// What the volume manager keeps of a pod beyond its shared Pod: the desired state built from
/// it (reused by every pass while the pod is unchanged). Measured at 529 bytes; 721 while each
/// pod volume held its CSI volume inline (about 200 bytes, `None` for all but CSI volumes), and
/// 37 KiB while each held a copy of its k8s-openapi `Volume` in a `BTreeMap` node.
const DESIRED_BOUND_PER_POD: isize = 640;

/// What the actual state keeps of a pod whose one volume is mounted: measured at 417 bytes,
/// 765 while each mounted volume held its CSI volume inline.
const MOUNTED_BOUND_PER_POD: isize = 512;

/// A volume manager's memory after a complete list of no pods, with the desired state of no
/// pods built: what it keeps whatever the pods.
fn memory_of_no_pods() -> VolumeManagerMemory {
    let mut memory = VolumeManagerMemory {
        listed: true,
        ..Default::default()
    };
    drop(memory.desired("pods-0"));
    memory
}

/// The watch reports `pods`.
fn remember(memory: &mut VolumeManagerMemory, pods: &[KeptPod]) {
    for pod in pods {
        let uid = pod.uid().expect("a uid").to_owned();
        memory.pods.insert(uid, pod.clone());
    }
}

/// What the desired state costs a pod.
fn the_volume_managers_desired_state_of_a_pod_is_small_and_given_back() -> isize {
    let pods: Vec<KeptPod> = (0..PODS).map(pod).collect();
    // Kept as JSON, as a settled pod is.
    kept_pod::cool();
    kept_pod::cool();
    let mut memory = memory_of_no_pods();
    let start = live();
    remember(&mut memory, &pods);
    let desired = memory.desired("pods-0");
    assert_eq!(desired.pods.len(), PODS);
    drop(desired);
    let per_pod = (live() - start) / PODS as isize;
    assert!(
        per_pod <= DESIRED_BOUND_PER_POD,
        "{per_pod} bytes a pod (bound {DESIRED_BOUND_PER_POD}): a pod volume holds its Volume inline?"
    );
    // What a reconciler pass and a provider's question ask of pods that did not change does
    // not decode them again.
    let decodes = kept_pod::decodes();
    drop(memory.desired("pods-0"));
    for pod in &pods {
        let uid = pod.uid().expect("a uid");
        assert!(
            memory
                .desired_pod("pods-0", uid)
                .wants(uid, "kube-api-access-282j9")
        );
    }
    assert_eq!(
        kept_pod::decodes() - decodes,
        0,
        "pods decoded to answer for pods that did not change"
    );
    memory.pods = Default::default();
    drop(memory.desired("pods-0"));
    assert_eq!(live() - start, 0, "bytes still held with no pods left");
    per_pod
}

/// The volume manager's memory of pods whose volumes were set up, once the pods are deleted and
/// their volumes and directories torn down: nothing, not even the room its maps had for them
/// (an emptied `BTreeMap` kept its root node, 3.5 KiB for the mounts of a node).
fn the_volume_manager_keeps_nothing_of_pods_torn_down() {
    let pods: Vec<KeptPod> = (0..PODS).map(pod).collect();
    let now = tokio::time::Instant::now();
    let mut memory = memory_of_no_pods();
    let start = live();
    remember(&mut memory, &pods);
    let desired = memory.desired("pods-0");
    let before_mounts = live();
    for (uid, pod) in &desired.pods {
        for volume in pod.volumes.values() {
            memory.actual.mark_mounted(uid, volume, now);
        }
    }
    let mounted_per_pod = (live() - before_mounts) / PODS as isize;
    assert!(
        mounted_per_pod <= MOUNTED_BOUND_PER_POD,
        "{mounted_per_pod} bytes a mounted pod (bound {MOUNTED_BOUND_PER_POD}): a mounted volume holds what it does not need inline?"
    );
    drop(desired);
    assert_eq!(memory.actual.mounts.len(), PODS, "one volume a pod");
    for pod in &pods {
        memory.forget_pod(pod.uid().expect("a uid"));
    }
    drop(memory.desired("pods-0"));
    let mounted: Vec<(String, String)> = memory.actual.mounts.keys().cloned().collect();
    for (uid, volume) in &mounted {
        memory.actual.mark_unmounted(uid, volume);
        memory.actual.mark_pod_dir_removed(uid);
    }
    drop(mounted);
    assert_eq!(
        live() - start,
        0,
        "bytes the volume manager still holds with every pod torn down"
    );
}
