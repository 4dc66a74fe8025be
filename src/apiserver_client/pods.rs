//! [`PodApi`] over kube-rs: pod reads and status patches through the heartbeat client (a pod
//! status change must not wait behind the rate limit, and every request is bounded by the
//! heartbeat timeout); the final delete through the rate-limited main client; the watch of the
//! node's pods (`spec.nodeName=<node>`) through the main client, reconnecting with backoff;
//! pod events through the event recorder (`events`), as node events.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use jiff::Timestamp;
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::Time};
use kube::{
    Resource,
    api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::watcher,
};
use nodepulse_actors::{
    kept_pod::KeptPod,
    ports::{ApiError, ApiRecovery, ApiResult, MirrorPodApi, PodApi, PodEvent, PodWatchEvent},
    shrink::map_after_removal,
};
use serde_json::json;

use super::{
    KubeApi, events, events::correlator::event_name, fit_lists::fit_lists, resume::resuming, timed,
};

/// The DELETE of a finished pod: at once, and only the pod with this UID.
pub fn final_delete(uid: &str) -> DeleteParams {
    DeleteParams::default()
        .grace_period(0)
        .preconditions(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        })
}

/// The Event the kubelet records about a pod (an eviction), in the pod's namespace.
pub fn pod_event(pod: &Pod, event: &PodEvent, host: &str, now: Timestamp) -> serde_json::Value {
    let (namespace, name) = (
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
    );
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(name, now),
            "namespace": namespace,
            "annotations": event.annotations,
        },
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name,
            "uid": pod.metadata.uid, "resourceVersion": pod.metadata.resource_version,
        },
        "reason": event.reason,
        "message": event.message,
        "type": if event.warning { "Warning" } else { "Normal" },
        "source": { "component": events::COMPONENT, "host": host },
        "reportingComponent": events::COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": Time(now),
        "lastTimestamp": Time(now),
        "count": 1,
    })
}

impl PodApi for KubeApi {
    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Pod>> {
        let (api, name, timeout) = (
            Api::<Pod>::namespaced(self.heartbeat_client(), namespace),
            name.to_owned(),
            self.heartbeat_timeout(),
        );
        Box::pin(async move { timed(timeout, api.get(&name)).await })
    }

    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Pod>> {
        let (client, timeout) = (self.heartbeat_client(), self.heartbeat_timeout());
        // Serialized here, as `Api::patch_status` would on its first poll, so that a PATCH
        // waiting its turn holds its body (one allocation), not the tree of JSON maps the
        // patch was built as: a fleet's burst queues thousands of them.
        let request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
            .patch_subresource(
                "status",
                name,
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .map(|mut request| {
                request.extensions_mut().insert("patch_status");
                request
            })
            .map_err(kube::Error::BuildRequest);
        Box::pin(
            async move { timed(timeout, async { client.request::<Pod>(request?).await }).await },
        )
    }

    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let (main, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (namespace, name, params) = (namespace.to_owned(), name.to_owned(), final_delete(uid));
        Box::pin(async move {
            let api = Api::<Pod>::namespaced(main.await, &namespace);
            timed(timeout, api.delete(&name, &params)).await.map(|_| ())
        })
    }

    fn record_pod_event(&self, pod: &Pod, event: PodEvent) -> BoxFuture<'static, ApiResult<()>> {
        let host = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .unwrap_or_default();
        let now = Timestamp::now();
        match serde_json::from_value(pod_event(pod, &event, &host, now)) {
            Ok(event) => self.record(event, now),
            Err(error) => Box::pin(async move { Err(ApiError::decode(error)) }),
        }
    }

    fn watch_pods(&self, node: &str) -> BoxStream<'static, PodWatchEvent> {
        let api = Api::<Pod>::all(self.main.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        let mut relist = Relist::default();
        resuming(watcher(api, config), self.reachability.recovery())
            .flat_map(move |event| futures::stream::iter(relist.step(event)))
            .boxed()
    }
    fn recovery(&self) -> ApiRecovery {
        self.reachability.recovery()
    }
}

/// A static pod's mirror pod, created through the rate-limited main client as the kubelet's
/// mirror client does.
impl MirrorPodApi for KubeApi {
    fn create_pod(&self, pod: Pod) -> BoxFuture<'static, ApiResult<Pod>> {
        let (main, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        Box::pin(async move {
            let api = Api::<Pod>::namespaced(main.await, &namespace);
            timed(timeout, api.create(&PostParams::default(), &pod)).await
        })
    }
}

/// A watched pod as the node keeps it, one [`KeptPod`] shared by every part that holds it. Its
/// `managedFields` are dropped: nothing on a node reads them, and they decode into a tree of
/// JSON maps that was the largest part of a pod the node keeps once its status was written.
/// Its lists are cut to their length (`fit_lists`) for as long as it is decoded.
pub(super) fn kept_pod(mut pod: Pod) -> KeptPod {
    pod.metadata.managed_fields = None;
    fit_lists(&mut pod);
    KeptPod::new(Arc::new(pod))
}

/// The pods the watch has reported, so that a relist (after a reconnect) reports the ones that
/// went away meanwhile as deleted.
#[derive(Default)]
struct Relist {
    /// The pods handed out (shared with the subscriber, not copied).
    known: HashMap<String, KeptPod>,
    seen: Option<HashSet<String>>,
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Relist {
    fn step(&mut self, event: Result<watcher::Event<Pod>, watcher::Error>) -> Vec<PodWatchEvent> {
        match event {
            Ok(watcher::Event::Init) => {
                self.seen = Some(HashSet::new());
                Vec::new()
            }
            Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                if let Some(seen) = self.seen.as_mut() {
                    seen.insert(key(&pod));
                }
                let key = key(&pod);
                let pod = kept_pod(pod);
                self.known.insert(key, pod.clone());
                vec![PodWatchEvent::Applied(pod)]
            }
            Ok(watcher::Event::Delete(pod)) => {
                self.known.remove(&key(&pod));
                map_after_removal(&mut self.known);
                vec![PodWatchEvent::Deleted(kept_pod(pod))]
            }
            Ok(watcher::Event::InitDone) => {
                let seen = self.seen.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .known
                    .keys()
                    .filter(|name| !seen.contains(*name))
                    .cloned()
                    .collect();
                gone.into_iter()
                    .filter_map(|name| self.known.remove(&name))
                    .map(PodWatchEvent::Deleted)
                    .chain([PodWatchEvent::Listed])
                    .collect()
            }
            Err(error) => {
                tracing::debug!(%error, "pod watch error; the watcher retries");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
#[path = "pods_tests.rs"]
pub(crate) mod tests;
