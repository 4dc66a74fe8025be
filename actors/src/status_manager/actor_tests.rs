//! StatusManagerActor against an in-memory pod API that applies the patches it gets (with the
//! UID precondition) and records every call.

use crate::kept_pod::KeptPod;
use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use actix::{Actor, Addr};
use futures::{future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use nodepulse_supervisor::{Kept, Recipient};
use serde_json::{Value, json};

use super::{PodStatusStore, StatusManagerActor, StatusManagerSettings};
use crate::{
    messages::{
        EvictPod, FlushPodStatuses, PodGone, PodObserved, SetContainerReadiness, SetPodStatus,
        StopPod, TerminatePod,
    },
    ports::{
        ApiError, ApiResult, PodApi, PodEvent, PodWatchEvent,
        fakes::{self, strategic::apply},
    },
};

#[derive(Default)]
struct FakeState {
    pods: HashMap<String, Value>,
    gets: u32,
    patches: Vec<Value>,
    deletes: Vec<(String, String)>,
    patch_failures: VecDeque<ApiError>,
    events: Vec<(String, PodEvent)>,
    /// Answer a GET of a missing pod as the node authorizer does (403), not 404.
    forbid_missing: bool,
}

#[derive(Clone, Default)]
struct FakePodApi(Arc<Mutex<FakeState>>);

impl FakePodApi {
    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().expect("fake state")
    }

    fn put(&self, pod: &Pod) {
        let name = pod.metadata.name.clone().expect("name");
        self.state()
            .pods
            .insert(name, serde_json::to_value(pod).expect("pod"));
    }

    fn status(&self, name: &str) -> Value {
        self.state().pods[name]["status"].clone()
    }
}

impl PodApi for FakePodApi {
    fn get_pod(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<Pod>> {
        let mut state = self.state();
        state.gets += 1;
        let result = state
            .pods
            .get(name)
            .map(|pod| serde_json::from_value(pod.clone()).expect("pod"))
            .ok_or_else(|| match state.forbid_missing {
                true => ApiError::Refused {
                    code: 403,
                    reason: "Forbidden".to_owned(),
                    message: "no relationship found between node and this object".to_owned(),
                },
                false => ApiError::NotFound(name.to_owned()),
            });
        Box::pin(async move { result })
    }

    fn patch_pod_status(
        &self,
        _: &str,
        name: &str,
        patch: Value,
    ) -> BoxFuture<'static, ApiResult<Pod>> {
        let mut state = self.state();
        state.patches.push(patch.clone());
        let result = if let Some(error) = state.patch_failures.pop_front() {
            Err(error)
        } else {
            match state.pods.get_mut(name) {
                None => Err(ApiError::NotFound(name.to_owned())),
                Some(pod) if pod["metadata"]["uid"] != patch["metadata"]["uid"] => {
                    Err(ApiError::Refused {
                        code: 422,
                        reason: "Invalid".to_owned(),
                        message: "the UID precondition failed".to_owned(),
                    })
                }
                Some(pod) => {
                    apply(&mut pod["status"], &patch["status"]);
                    Ok(serde_json::from_value(pod.clone()).expect("pod"))
                }
            }
        };
        Box::pin(async move { result })
    }

    fn delete_pod(&self, _: &str, name: &str, uid: &str) -> BoxFuture<'static, ApiResult<()>> {
        let mut state = self.state();
        state.deletes.push((name.to_owned(), uid.to_owned()));
        let result = match state.pods.get(name) {
            None => Err(ApiError::NotFound(name.to_owned())),
            Some(pod) if pod["metadata"]["uid"] != uid => {
                Err(ApiError::Conflict("precondition failed: UID".to_owned()))
            }
            Some(_) => {
                state.pods.remove(name);
                Ok(())
            }
        };
        Box::pin(async move { result })
    }

    fn watch_pods(&self, _: &str) -> BoxStream<'static, PodWatchEvent> {
        Box::pin(futures::stream::pending())
    }

    fn record_pod_event(&self, pod: &Pod, event: PodEvent) -> BoxFuture<'static, ApiResult<()>> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.state().events.push((name, event));
        Box::pin(async { Ok(()) })
    }
}

fn pod(name: &str, uid: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"nodeName": "worker-1", "restartPolicy": "Always", "containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "example.com/gate", "status": "True"}]},
    }))
    .expect("pod")
}

fn running(ready: bool) -> PodStatus {
    serde_json::from_value(json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "containerID": "containerd://app-1",
            "ready": ready, "restartCount": 0, "state": {"running": {}}}]
    }))
    .expect("status")
}

/// The kubelet's 10 s batch period: the tests run on paused time, where it costs nothing.
const SYNC_PERIOD: Duration = Duration::from_secs(10);

fn start(api: &FakePodApi, store: &Kept<PodStatusStore>) -> Addr<StatusManagerActor> {
    start_with_period(api, store, SYNC_PERIOD)
}

fn start_with_period(
    api: &FakePodApi,
    store: &Kept<PodStatusStore>,
    sync_period: Duration,
) -> Addr<StatusManagerActor> {
    let mut settings = StatusManagerSettings::new("worker-1");
    settings.sync_period = sync_period;
    StatusManagerActor::new(settings, Arc::new(api.clone()), store.clone()).start()
}

/// Tells `manager` the pod's status, as a provider does.
async fn set_status(manager: &Addr<StatusManagerActor>, pod: Pod, status: PodStatus) {
    manager
        .send(SetPodStatus {
            pod: KeptPod::from(pod),
            status,
        })
        .await
        .expect("delivered");
}

/// Tells `manager` the API shows `pod`, as the pod lifecycle actor does for a watch event.
async fn observe(manager: &Addr<StatusManagerActor>, pod: &Pod) {
    manager
        .send(PodObserved {
            pod: KeptPod::from(pod.clone()),
        })
        .await
        .expect("delivered");
}

/// Waits for `condition` up to ten batch periods of tokio time.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    fakes::eventually(what, SYNC_PERIOD * 10, condition).await;
}

fn condition(status: &Value, kind: &str) -> Option<String> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
}

#[actix_rt::test]
async fn a_change_is_patched_at_once_with_the_uid_and_others_conditions_stay() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("the status is patched", || {
        api.status("web")["phase"] == "Running"
    })
    .await;
    {
        let state = api.state();
        assert_eq!(state.patches.len(), 1);
        assert_eq!(state.patches[0]["metadata"]["uid"], "uid-1");
        let status = &state.pods["web"]["status"];
        assert_eq!(condition(status, "Ready").as_deref(), Some("True"));
        assert_eq!(
            condition(status, "example.com/gate").as_deref(),
            Some("True"),
            "a condition the kubelet does not own is kept"
        );
    }
    eventually("the version is recorded as sent", || {
        store.read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
}

#[actix_rt::test]
async fn a_status_observes_its_pods_generation_which_a_late_older_one_does_not_lower() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let at = |generation: i64| {
        let mut pod = pod("web", "uid-1");
        pod.metadata.generation = Some(generation);
        pod
    };
    api.put(&at(2));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    let observed = || api.status("web")["observedGeneration"].clone();
    set_status(&manager, at(2), running(true)).await;
    eventually("generation 2 observed", || observed() == 2).await;
    // The same status made from the next generation: the generation alone is a change.
    set_status(&manager, at(3), running(true)).await;
    eventually("generation 3 observed", || observed() == 3).await;
    // A status made from the older pod, arriving late, changes the rest but not that.
    set_status(&manager, at(2), running(false)).await;
    eventually("the late status is patched", || {
        condition(&api.status("web"), "Ready").as_deref() == Some("False")
    })
    .await;
    assert_eq!(observed(), 3);
    assert_eq!(api.state().patches.len(), 3);
}

#[actix_rt::test]
async fn a_status_the_api_already_has_sends_no_patch() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let mut already = pod("web", "uid-1");
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    // Let a first sync write it, then restart from a fresh cache: the API has it all.
    api.put(&already);
    set_status(&manager, already.clone(), running(true)).await;
    eventually("the first sync is done", || {
        store.read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
    already.status = serde_json::from_value(api.status("web")).ok();
    let fresh = Kept::<PodStatusStore>::default();
    let second = start(&api, &fresh);
    let patches_before = api.state().patches.len();
    set_status(&second, already, running(true)).await;
    eventually("the second sync is done", || {
        fresh.read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
    assert_eq!(api.state().patches.len(), patches_before, "nothing to send");
}

#[actix_rt::test]
async fn a_recreated_pod_is_not_touched_by_the_old_status() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-new"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(&manager, pod("web", "uid-old"), running(true)).await;
    eventually("the old status is dropped", || {
        store.read(|store| store.cache().get("uid-old").is_none())
    })
    .await;
    assert!(api.state().patches.is_empty());
    assert_eq!(api.status("web")["phase"], "Pending");
}

#[actix_rt::test]
async fn a_terminated_pod_being_deleted_is_deleted_with_its_uid() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let mut deleting = pod("web", "uid-1");
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::clock::system()()),
    );
    api.put(&deleting);
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    // As the pod lifecycle actor: the watch's pod is observed before any status of it.
    observe(&manager, &deleting).await;
    set_status(&manager, deleting.clone(), running(true)).await;
    manager
        .send(TerminatePod {
            pod: KeptPod::from(deleting),
        })
        .await
        .expect("delivered");
    eventually("the pod is deleted", || api.state().pods.is_empty()).await;
    {
        let state = api.state();
        assert_eq!(state.deletes, [("web".to_owned(), "uid-1".to_owned())]);
        let last = state.patches.last().expect("the final status was patched");
        assert_eq!(last["status"]["phase"], "Failed");
    }
    eventually("the cache forgets the pod", || {
        store.read(|store| store.cache().get("uid-1").is_none())
    })
    .await;
}

/// Nothing of a deleted pod stays: neither its entries nor the table slots they took, whether
/// StatusManager deleted it (finished, being deleted) or the watch reported it gone.
#[actix_rt::test]
async fn deleted_pods_leave_nothing_in_the_store() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    let pods: Vec<Arc<Pod>> = (0..40)
        .map(|index| Arc::new(pod(&format!("web-{index}"), &format!("uid-{index}"))))
        .collect();
    for pod in &pods {
        api.put(pod);
        set_status(&manager, Pod::clone(pod), running(true)).await;
        manager
            .send(PodObserved {
                pod: KeptPod::from(Arc::clone(pod)),
            })
            .await
            .expect("delivered");
    }
    eventually("every status is sent", || {
        store.read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
    assert!(store.read(PodStatusStore::footprint).0 >= 3 * pods.len());
    let (by_manager, by_watch) = pods.split_at(pods.len() / 2);
    for pod in by_manager {
        let mut deleting = Pod::clone(pod);
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::clock::system()()),
        );
        api.put(&deleting);
        manager
            .send(TerminatePod {
                pod: KeptPod::from(deleting),
            })
            .await
            .expect("delivered");
    }
    for pod in by_watch {
        let uid = pod.metadata.uid.clone().expect("uid");
        manager.send(PodGone { uid }).await.expect("delivered");
    }
    eventually("the store holds nothing", || {
        store.read(PodStatusStore::footprint) == (0, 0)
    })
    .await;
    assert_eq!(api.state().deletes.len(), by_manager.len());
}

#[actix_rt::test]
async fn a_failed_patch_is_resent_by_the_batch_pass() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    api.state()
        .patch_failures
        .extend([ApiError::unavailable(), ApiError::unavailable()]);
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("the status is patched after two failures", || {
        api.status("web")["phase"] == "Running"
    })
    .await;
    assert_eq!(api.state().patches.len(), 3);
}

#[actix_rt::test]
async fn a_new_instance_sends_what_the_stopped_one_had_not() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    api.state()
        .patch_failures
        .extend((0..1000).map(|_| ApiError::unavailable()));
    let store = Kept::<PodStatusStore>::default();
    let mut settings = StatusManagerSettings::new("worker-1");
    settings.sync_period = Duration::from_secs(3600);
    let first = StatusManagerActor::new(settings, Arc::new(api.clone()), store.clone()).start();
    set_status(&first, pod("web", "uid-1"), running(true)).await;
    eventually("the first attempt failed", || {
        !api.state().patches.is_empty()
    })
    .await;
    drop(first);
    api.state().patch_failures.clear();
    let _second = start(&api, &store);
    eventually("the new instance sent it", || {
        api.status("web")["phase"] == "Running"
    })
    .await;
}

#[actix_rt::test]
async fn a_readiness_flip_regenerates_ready_and_containers_ready() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(&manager, pod("web", "uid-1"), running(false)).await;
    manager
        .send(SetContainerReadiness {
            pod_uid: "uid-1".into(),
            container_id: "containerd://app-1".into(),
            ready: true,
        })
        .await
        .expect("delivered");
    eventually("the pod is Ready in the API", || {
        let status = api.status("web");
        condition(&status, "Ready").as_deref() == Some("True")
            && condition(&status, "ContainersReady").as_deref() == Some("True")
            && status["containerStatuses"][0]["ready"] == true
    })
    .await;
    manager
        .send(SetContainerReadiness {
            pod_uid: "uid-1".into(),
            container_id: "containerd://app-1".into(),
            ready: false,
        })
        .await
        .expect("delivered");
    eventually("the pod is unready in the API", || {
        let status = api.status("web");
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .is_some_and(|ready| {
                ready["status"] == "False"
                    && ready["message"] == "containers with unready status: [app]"
            })
    })
    .await;
}

#[actix_rt::test]
async fn a_finished_pod_nobody_deletes_is_not_polled() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("job", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    manager
        .send(TerminatePod {
            pod: KeptPod::from(pod("job", "uid-1")),
        })
        .await
        .expect("delivered");
    eventually("the final status is sent", || {
        store.read(|store| store.cache().unsent_pods().is_empty())
            && api.status("job")["phase"] == "Failed"
    })
    .await;
    let gets = api.state().gets;
    let passes = store.read(PodStatusStore::batch_passes);
    eventually("six more batch passes ran", || {
        store.read(PodStatusStore::batch_passes) >= passes + 6
    })
    .await;
    assert_eq!(
        api.state().gets,
        gets,
        "six batch passes read nothing: the pod is not being deleted"
    );
    assert!(api.state().deletes.is_empty());
}

#[actix_rt::test]
async fn the_batch_pass_reconciles_a_status_the_watch_shows_edited_and_keeps_others_conditions() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("the first sync is done", || {
        store.read(|store| store.cache().unsent_pods().is_empty()) && api.state().patches.len() == 1
    })
    .await;
    // Someone else flips Ready and adds a condition; the watch reports it.
    let mut edited: Value = api.state().pods["web"].clone();
    edited["status"]["conditions"] = json!([
        {"type": "Ready", "status": "False", "reason": "Tampered"},
        {"type": "example.com/other", "status": "True"},
    ]);
    api.state().pods.insert("web".into(), edited.clone());
    manager
        .send(PodObserved {
            pod: KeptPod::from(serde_json::from_value::<Pod>(edited).expect("pod")),
        })
        .await
        .expect("delivered");
    eventually("the batch pass repairs Ready", || {
        condition(&api.status("web"), "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        condition(&api.status("web"), "example.com/other").as_deref(),
        Some("True"),
        "others' conditions are kept"
    );
}

/// The storm of issue 29: kube-apiserver serves a status back with Go's empty fields
/// (`lastState: {}`, a zero `lastProbeTime` as `null`, no empty strings). A pod whose API status
/// is what nodepulse sent, served that way, is settled: batch passes read and write nothing.
#[actix_rt::test]
async fn a_settled_pod_served_with_gos_empty_fields_costs_no_request_in_batch_passes() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    let mut status = running(true);
    status.message = Some(String::new());
    set_status(&manager, pod("web", "uid-1"), status).await;
    eventually("the first sync is done", || {
        store.read(|store| store.cache().unsent_pods().is_empty()) && api.state().patches.len() == 1
    })
    .await;
    // What the API server stores and serves back, as the pod watch reports it.
    let mut served: Value = api.state().pods["web"].clone();
    served["status"]["containerStatuses"][0]["lastState"] = json!({});
    served["status"]["conditions"][1]["lastProbeTime"] = Value::Null;
    served["status"]
        .as_object_mut()
        .expect("a status")
        .remove("message");
    api.state().pods.insert("web".into(), served.clone());
    manager
        .send(PodObserved {
            pod: KeptPod::from(serde_json::from_value::<Pod>(served).expect("pod")),
        })
        .await
        .expect("delivered");
    let (gets, patches) = {
        let state = api.state();
        (state.gets, state.patches.len())
    };
    let passes = store.read(PodStatusStore::batch_passes);
    eventually("six more batch passes ran", || {
        store.read(PodStatusStore::batch_passes) >= passes + 6
    })
    .await;
    let state = api.state();
    assert_eq!(
        (state.gets, state.patches.len()),
        (gets, patches),
        "a settled pod was read or patched again: {:?}",
        &state.patches[patches..]
    );
}

/// A settled pod's status is what the watch's pod already holds: the cache keeps that pod
/// instead of a copy of its own, and takes a copy of its own again at the next change.
#[actix_rt::test]
async fn a_status_the_watchs_pod_has_is_held_once_and_a_change_is_still_sent() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let mut bare = pod("web", "uid-1");
    bare.status = None;
    api.put(&bare);
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    let held = || {
        store.read(|store| {
            store
                .cache()
                .get("uid-1")
                .is_some_and(|entry| entry.status.is_the_apis())
        })
    };
    let status = running(true);
    set_status(&manager, bare.clone(), status.clone()).await;
    eventually("the first sync is done", || {
        store.read(|store| store.cache().unsent_pods().is_empty()) && api.state().patches.len() == 1
    })
    .await;
    assert!(!held(), "not before the watch shows it");
    // The pod as the API server serves it: Go writes the empty `lastState` struct as `{}`.
    let served = || {
        let mut served = api.state().pods["web"].clone();
        served["status"]["containerStatuses"][0]["lastState"] = json!({});
        serde_json::from_value::<Pod>(served).expect("pod")
    };
    let first = served();
    observe(&manager, &first).await;
    assert!(held(), "the watch's pod has the cached status: {first:?}");

    let mut changed = status;
    changed.message = Some("changed".to_owned());
    set_status(&manager, bare, changed).await;
    assert!(!held(), "a new status is the cache's own");
    eventually("the change is sent", || {
        api.status("web")["message"] == "changed"
    })
    .await;
    let second = served();
    observe(&manager, &second).await;
    assert!(held(), "the change, once the watch shows it");
    // Someone else edits the status: the watch's pod no longer has the cached one, which the
    // cache keeps as its own (and the batch pass reconciles).
    let mut edited = second;
    edited.status = Some(running(false));
    observe(&manager, &edited).await;
    assert!(!held(), "a status the watch's pod does not have");
    let message = store.read(|store| {
        store
            .cache()
            .get("uid-1")
            .and_then(|entry| entry.status.get().message.clone())
    });
    assert_eq!(
        message.as_deref(),
        Some("changed"),
        "the cached status is unchanged"
    );
}

#[actix_rt::test]
async fn an_eviction_is_recorded_as_a_warning_event_and_handed_to_the_provider() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let store = Kept::<PodStatusStore>::default();
    let stops = Arc::new(Mutex::new(Vec::new()));
    let provider = Recipient::<StopPod>::from_fn({
        let stops = Arc::clone(&stops);
        move |stop| {
            stops.lock().expect("stops").push(stop);
            Ok(())
        }
    });
    let manager = StatusManagerActor::new(
        StatusManagerSettings::new("worker-1"),
        Arc::new(api.clone()),
        store.clone(),
    )
    .with_provider(provider)
    .start();
    manager
        .send(EvictPod {
            pod: Box::new(pod("hog", "uid-9")),
            message: "The node was low on resource: memory. ".into(),
            annotations: [("starved_resource".to_owned(), "memory".to_owned())].into(),
        })
        .await
        .expect("delivered");
    eventually("the provider is told to stop the pod", || {
        stops.lock().unwrap().len() == 1
    })
    .await;
    let stop = stops.lock().unwrap()[0].clone();
    assert_eq!(
        (stop.uid.as_str(), stop.reason.as_str()),
        ("uid-9", "Evicted")
    );
    eventually("a Warning event is recorded", || {
        !api.state().events.is_empty()
    })
    .await;
    let (name, event) = api.state().events[0].clone();
    assert_eq!(name, "hog");
    assert!(event.warning && event.reason == "Evicted");
    assert_eq!(event.annotations["starved_resource"], "memory");
}

#[actix_rt::test]
async fn a_failing_api_is_retried_once_per_batch_pass_not_in_a_loop() {
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    api.state()
        .patch_failures
        .extend((0..100_000).map(|_| ApiError::unavailable()));
    let store = Kept::<PodStatusStore>::default();
    let manager = start_with_period(&api, &store, Duration::from_millis(50));
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("four batch passes", || {
        store.read(PodStatusStore::batch_passes) >= 4
    })
    .await;
    let (patches, passes) = (
        api.state().patches.len(),
        store.read(PodStatusStore::batch_passes),
    );
    assert!(
        patches as u64 <= passes + 2,
        "{patches} attempts in {passes} batch passes: a failed sync must wait for the next pass"
    );
    assert!(
        patches >= 2,
        "the batch passes retry it ({patches} attempts)"
    );
}

/// A status whose write failed waits for the next batch pass; a shutdown's flush cannot wait
/// for it (an hour here), so it tries again at once and answers once the status is in.
#[actix_rt::test]
async fn a_flush_resends_a_failed_status_at_once_and_answers_when_all_are_in() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    api.state()
        .patch_failures
        .push_back(ApiError::unavailable());
    let store = Kept::<PodStatusStore>::default();
    let manager = start_with_period(&api, &store, Duration::from_secs(3600));
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("the first write fails", || api.state().patches.len() == 1).await;
    assert_eq!(store.read(|store| store.cache().unsent_pods().len()), 1);

    let unsent = manager.send(FlushPodStatuses).await.expect("answered");
    assert_eq!(unsent, Some(0), "every status is in the API");
    assert_eq!(api.status("web")["phase"], "Running");
    assert_eq!(api.state().patches.len(), 2);
    assert_eq!(
        manager.send(FlushPodStatuses).await.expect("answered"),
        Some(0),
        "with nothing unsent a flush answers at once"
    );
}

#[actix_rt::test]
async fn a_flush_says_how_many_statuses_the_api_still_refuses() {
    tokio::time::pause();
    let api = FakePodApi::default();
    for (name, uid) in [("web", "uid-1"), ("db", "uid-2")] {
        api.put(&pod(name, uid));
    }
    // Every write fails until the flush's own attempts are spent: two first tries, two retries.
    api.state()
        .patch_failures
        .extend((0..4).map(|_| ApiError::unavailable()));
    let store = Kept::<PodStatusStore>::default();
    let manager = start_with_period(&api, &store, Duration::from_secs(3600));
    for (name, uid) in [("web", "uid-1"), ("db", "uid-2")] {
        set_status(&manager, pod(name, uid), running(true)).await;
    }
    eventually("both first writes fail", || api.state().patches.len() == 2).await;

    let unsent = manager.send(FlushPodStatuses).await.expect("answered");
    assert_eq!(unsent, Some(2), "both were tried again and refused again");
    assert_eq!(api.state().patches.len(), 4);
}

#[actix_rt::test]
async fn with_no_pod_known_no_batch_pass_wakes_the_actor() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&pod("web", "uid-1"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        store.read(PodStatusStore::batch_passes),
        0,
        "six periods without a pod: no pass"
    );
    set_status(&manager, pod("web", "uid-1"), running(true)).await;
    eventually("batch passes run once a pod is known", || {
        store.read(PodStatusStore::batch_passes) >= 2
    })
    .await;
}

#[actix_rt::test]
async fn a_deleted_pods_last_statuses_bring_back_nothing_and_cost_no_request() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let mut deleting = pod("web", "uid-1");
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::clock::system()()),
    );
    api.put(&deleting);
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    observe(&manager, &deleting).await;
    set_status(&manager, deleting.clone(), running(true)).await;
    eventually("the status is patched", || !api.state().patches.is_empty()).await;
    // The pod goes from the API (its namespace was deleted); the watch says so. The node
    // authorizer now refuses a GET of it.
    api.state().pods.clear();
    api.state().forbid_missing = true;
    manager
        .send(crate::messages::PodGone {
            uid: "uid-1".to_owned(),
        })
        .await
        .expect("delivered");
    let requests = |api: &FakePodApi| {
        let state = api.state();
        (state.gets, state.patches.len())
    };
    let before = requests(&api);
    // The provider, still cleaning up, reports it twice more, then it is terminated.
    set_status(&manager, deleting.clone(), running(false)).await;
    set_status(&manager, deleting.clone(), running(false)).await;
    manager
        .send(TerminatePod {
            pod: KeptPod::from(deleting),
        })
        .await
        .expect("delivered");
    for _ in 0..5 {
        tokio::time::sleep(SYNC_PERIOD).await;
    }
    assert_eq!(
        requests(&api),
        before,
        "no request for a pod the API no longer has"
    );
    assert!(
        store.read(|store| store.cache().get("uid-1").is_none()),
        "nothing kept of it"
    );
}

/// A static pod (from a manifest) as its provider reports it, and its mirror pod in the API.
fn static_pod(name: &str, uid: &str) -> Pod {
    let mut pod = pod(name, uid);
    pod.metadata.annotations = Some(
        [
            ("kubernetes.io/config.source", "file"),
            ("kubernetes.io/config.hash", uid),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect(),
    );
    pod
}

fn mirror_pod(name: &str, api_uid: &str, hash: &str) -> Pod {
    let mut mirror = static_pod(name, api_uid);
    mirror
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("kubernetes.io/config.mirror".to_owned(), hash.to_owned());
    mirror
}

#[actix_rt::test]
async fn a_static_pods_status_waits_for_its_mirror_pod_and_is_patched_under_the_mirrors_uid() {
    tokio::time::pause();
    let api = FakePodApi::default();
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(
        &manager,
        static_pod("etcd-worker-1", "static-uid"),
        running(true),
    )
    .await;
    eventually("the sync found no mirror pod", || api.state().gets >= 1).await;
    assert!(
        store.read(|store| store.cache().unsent_pods() == ["static-uid"]),
        "no mirror pod yet: the status is kept, not dropped"
    );
    api.put(&mirror_pod("etcd-worker-1", "mirror-uid", "static-uid"));
    eventually("the next batch pass writes it to the mirror pod", || {
        api.status("etcd-worker-1")["phase"] == "Running"
    })
    .await;
    assert_eq!(api.state().patches[0]["metadata"]["uid"], "mirror-uid");
    eventually("the version is recorded as sent", || {
        store.read(|store| store.cache().unsent_pods().is_empty())
    })
    .await;
}

#[actix_rt::test]
async fn a_static_pods_status_waits_while_the_mirror_pod_is_another_manifest_versions() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&mirror_pod("etcd-worker-1", "mirror-old", "old-static-uid"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(
        &manager,
        static_pod("etcd-worker-1", "new-static-uid"),
        running(true),
    )
    .await;
    eventually("the sync found the old version's mirror", || {
        api.state().gets >= 1
    })
    .await;
    assert!(
        api.state().patches.is_empty(),
        "not written to the old version's mirror"
    );
    assert!(
        store.read(|store| store.cache().unsent_pods() == ["new-static-uid"]),
        "kept for the new mirror"
    );
    api.put(&mirror_pod("etcd-worker-1", "mirror-new", "new-static-uid"));
    eventually("the status reaches the new version's mirror", || {
        api.status("etcd-worker-1")["phase"] == "Running"
    })
    .await;
    assert_eq!(api.state().patches[0]["metadata"]["uid"], "mirror-new");
}

#[actix_rt::test]
async fn a_recreated_mirror_pod_seen_with_no_status_gets_the_static_pods_status_again() {
    tokio::time::pause();
    let api = FakePodApi::default();
    api.put(&mirror_pod("etcd-worker-1", "mirror-1", "static-uid"));
    let store = Kept::<PodStatusStore>::default();
    let manager = start(&api, &store);
    set_status(
        &manager,
        static_pod("etcd-worker-1", "static-uid"),
        running(true),
    )
    .await;
    eventually("the status is on the first mirror pod", || {
        api.status("etcd-worker-1")["phase"] == "Running"
    })
    .await;
    // The mirror pod is deleted and made again: the API serves it Pending, and the watch says so.
    let recreated = mirror_pod("etcd-worker-1", "mirror-2", "static-uid");
    api.put(&recreated);
    manager
        .send(PodObserved {
            pod: KeptPod::from(recreated),
        })
        .await
        .expect("delivered");
    eventually(
        "the batch pass writes the status to the new mirror pod",
        || api.status("etcd-worker-1")["phase"] == "Running",
    )
    .await;
    let state = api.state();
    assert_eq!(
        state.patches.last().expect("a patch")["metadata"]["uid"],
        "mirror-2"
    );
}

/// Every sync the actor starts waits as this future (boxed) until the API client has a slot
/// for its GET: in a fleet thousands wait at once after a burst of pods. Holding the GET's pod
/// and the merged status across the PATCH made it 7.4 KiB; the pods it reads are dropped
/// before any request now, so it is the job and little else.
#[test]
fn a_waiting_sync_holds_its_job_not_copies_of_the_pod() {
    let api: Arc<dyn PodApi> = Arc::new(FakePodApi::default());
    let job = super::sync::PodSyncJob {
        uid: "uid-1".to_owned(),
        namespace: "default".to_owned(),
        name: "web".to_owned(),
        version: 1,
        finished: false,
        status: super::held_status::HeldStatus::decided(running(true)),
        static_pod: false,
    };
    let job_size = size_of_val(&job);
    let sync = super::sync::sync_pod(api, job, || true, jiff::Timestamp::UNIX_EPOCH);
    let pod_size = size_of::<Pod>();
    assert!(
        size_of_val(&sync) < job_size + pod_size / 2,
        "a waiting sync takes {} bytes: its job is {job_size}, a Pod {pod_size}",
        size_of_val(&sync)
    );
}
