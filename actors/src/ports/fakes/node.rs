//! A fake `NodeApi`: one Node held as the API server would (create, get, strategic-merge status
//! patches, resourceVersion bumps), scripted failures, and a record of every call.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
};

use futures::{StreamExt, channel::mpsc, future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use tokio::sync::watch;

use super::strategic::apply;
use crate::ports::{ApiError, ApiResult, NodeApi, NodeEvent, NodeWatchEvent};

#[derive(Default)]
pub struct NodeState {
    /// The Node as the server holds it, as JSON.
    pub node: Option<Value>,
    resource_version: u64,
    pub creates: u32,
    pub gets: u32,
    /// Every status patch received, failed ones included, in order.
    pub patches: Vec<Value>,
    pub events: Vec<NodeEvent>,
    pub resets: u32,
    /// Failures returned by the next calls of each kind, front first.
    pub patch_failures: VecDeque<ApiError>,
    pub get_failures: VecDeque<ApiError>,
    watchers: Vec<mpsc::UnboundedSender<NodeWatchEvent>>,
    /// While set and `false`, answers to create, get and patch wait (what they answer is
    /// decided when called, as a server's is when the request lands).
    gate: Option<watch::Receiver<bool>>,
}

#[derive(Clone, Default)]
pub struct FakeNodeApi(Arc<Mutex<NodeState>>);

impl FakeNodeApi {
    pub fn state(&self) -> MutexGuard<'_, NodeState> {
        self.0.lock().expect("fake state")
    }

    /// The stored Node's condition of `kind`: (status, reason).
    pub fn condition(&self, kind: &str) -> Option<(String, String)> {
        let state = self.state();
        let conditions = state.node.as_ref()?["status"]["conditions"]
            .as_array()?
            .clone();
        conditions.iter().find(|c| c["type"] == kind).map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
    }

    /// Holds every answer to a create, get or status patch until the returned sender sends
    /// `true`: the request has landed, its answer is still on the way.
    pub fn hold_answers(&self) -> watch::Sender<bool> {
        let (release, gate) = watch::channel(false);
        self.state().gate = Some(gate);
        release
    }

    /// Deletes the Node and tells the watchers, as a `kubectl delete node` would.
    pub fn delete(&self) {
        self.state().node = None;
        self.report_absent();
    }

    /// Tells the watchers there is no Node, leaving it as it is: what a watch reports when
    /// its list was taken before the Node was created and answered after.
    pub fn report_absent(&self) {
        self.state()
            .watchers
            .retain(|watcher| watcher.unbounded_send(NodeWatchEvent::Deleted).is_ok());
    }

    fn stored(state: &NodeState, name: &str) -> ApiResult<Node> {
        let node = state
            .node
            .clone()
            .ok_or_else(|| ApiError::NotFound(format!("nodes {name:?} not found")))?;
        serde_json::from_value(node).map_err(ApiError::decode)
    }
}

/// `result`, once `state`'s gate (if any) opens.
fn answer<T: Send + 'static>(
    state: &NodeState,
    result: ApiResult<T>,
) -> BoxFuture<'static, ApiResult<T>> {
    let gate = state.gate.clone();
    Box::pin(async move {
        if let Some(mut gate) = gate {
            // A dropped sender opens the gate as well.
            let _ = gate.wait_for(|open| *open).await;
        }
        result
    })
}

fn bump(state: &mut NodeState) {
    state.resource_version += 1;
    let version = Value::String(state.resource_version.to_string());
    if let Some(node) = state.node.as_mut() {
        node["metadata"]["resourceVersion"] = version;
    }
}

impl NodeApi for FakeNodeApi {
    fn watch_node(&self, _name: &str) -> BoxStream<'static, NodeWatchEvent> {
        let (sender, receiver) = mpsc::unbounded();
        self.state().watchers.push(sender);
        receiver.boxed()
    }

    fn create_node(&self, node: Node) -> BoxFuture<'static, ApiResult<Node>> {
        let mut state = self.state();
        state.creates += 1;
        let name = node.metadata.name.clone().unwrap_or_default();
        let result = if state.node.is_some() {
            Err(ApiError::AlreadyExists(format!(
                "nodes {name:?} already exists"
            )))
        } else {
            let mut node = serde_json::to_value(node).expect("a Node serializes");
            node["metadata"]["uid"] = Value::String(format!("uid-{name}"));
            state.node = Some(node);
            bump(&mut state);
            Self::stored(&state, &name)
        };
        answer(&state, result)
    }

    fn get_node(&self, name: &str) -> BoxFuture<'static, ApiResult<Node>> {
        let mut state = self.state();
        state.gets += 1;
        let result = match state.get_failures.pop_front() {
            Some(error) => Err(error),
            None => Self::stored(&state, name),
        };
        answer(&state, result)
    }

    fn patch_node_status(&self, name: &str, patch: Value) -> BoxFuture<'static, ApiResult<Node>> {
        let mut state = self.state();
        state.patches.push(patch.clone());
        let result = match state.patch_failures.pop_front() {
            Some(error) => Err(error),
            None => match state.node.as_mut() {
                None => Err(ApiError::NotFound(format!("nodes {name:?} not found"))),
                Some(node) => {
                    apply(node, &patch);
                    bump(&mut state);
                    Self::stored(&state, name)
                }
            },
        };
        answer(&state, result)
    }

    fn record_event(&self, _node: &str, event: NodeEvent) -> BoxFuture<'static, ApiResult<()>> {
        self.state().events.push(event);
        Box::pin(async { Ok(()) })
    }

    fn reset_heartbeat_connections(&self) {
        self.state().resets += 1;
    }
}
