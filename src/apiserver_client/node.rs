//! [`NodeApi`] over kube-rs: registration through the rate-limited main client, status reads
//! and patches through the heartbeat client, events through the event recorder (`events`:
//! client-go's correlator, then the main client under the event rate limit).

use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::{
    api::{Api, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use nodepulse_actors::ports::{
    ApiError, ApiRecovery, ApiResult, NodeApi, NodeEvent, NodeWatchEvent,
};
use serde_json::json;

use super::{
    KubeApi, events, events::correlator::event_name, metrics::API_METRICS, resume::resuming, timed,
};

/// The Event the kubelet would record about its Node: the involved object's UID is the node
/// name, as the kubelet sets it.
pub fn node_event(node: &str, event: &NodeEvent, now: Timestamp) -> serde_json::Value {
    let time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": { "name": event_name(node, now), "namespace": "default" },
        "involvedObject": { "apiVersion": "v1", "kind": "Node", "name": node, "uid": node },
        "reason": event.reason,
        "message": event.message,
        "type": if event.warning { "Warning" } else { "Normal" },
        "source": { "component": events::COMPONENT, "host": node },
        "reportingComponent": events::COMPONENT,
        "reportingInstance": node,
        "firstTimestamp": time,
        "lastTimestamp": time,
        "count": 1,
    })
}

/// Whether the Node's Ready condition is True, as the API server has it.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

impl NodeApi for KubeApi {
    fn watch_node(&self, name: &str) -> BoxStream<'static, NodeWatchEvent> {
        let api = Api::<Node>::all(self.main.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut seen_in_relist = false;
        resuming(watcher(api, config), self.reachability.recovery())
            .filter_map(move |event| {
                let mapped = match event {
                    Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => {
                        seen_in_relist = true;
                        Some(NodeWatchEvent::Present(Box::new(node)))
                    }
                    Ok(watcher::Event::Delete(_)) => Some(NodeWatchEvent::Deleted),
                    Ok(watcher::Event::Init) => {
                        seen_in_relist = false;
                        None
                    }
                    Ok(watcher::Event::InitDone) => {
                        (!seen_in_relist).then_some(NodeWatchEvent::Deleted)
                    }
                    Err(error) => {
                        tracing::debug!(%error, "node watch error; the watcher retries");
                        None
                    }
                };
                futures::future::ready(mapped)
            })
            .boxed()
    }

    fn create_node(&self, node: Node) -> BoxFuture<'static, ApiResult<Node>> {
        let (main, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        Box::pin(async move {
            let api = Api::<Node>::all(main.await);
            timed(timeout, api.create(&PostParams::default(), &node)).await
        })
    }

    fn get_node(&self, name: &str) -> BoxFuture<'static, ApiResult<Node>> {
        let (api, name, timeout) = (
            Api::<Node>::all(self.heartbeat_client()),
            name.to_owned(),
            self.heartbeat_timeout(),
        );
        Box::pin(async move { timed(timeout, api.get(&name)).await })
    }

    fn patch_node_status(
        &self,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, ApiResult<Node>> {
        let (api, name, timeout) = (
            Api::<Node>::all(self.heartbeat_client()),
            name.to_owned(),
            self.heartbeat_timeout(),
        );
        Box::pin(async move {
            let result = timed(
                timeout,
                api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)),
            )
            .await;
            API_METRICS.node_status_update(result.is_ok());
            result
        })
    }

    fn record_event(&self, node: &str, event: NodeEvent) -> BoxFuture<'static, ApiResult<()>> {
        let now = Timestamp::now();
        match serde_json::from_value(node_event(node, &event, now)) {
            Ok(event) => self.record(event, now),
            Err(error) => Box::pin(async move { Err(ApiError::decode(error)) }),
        }
    }

    fn reset_heartbeat_connections(&self) {
        KubeApi::reset_heartbeat_connections(self);
    }
    fn recovery(&self) -> ApiRecovery {
        self.reachability.recovery()
    }
}
