//! One watch of the fleet's Nodes and one of the pods bound to them, demultiplexed by node
//! name into the per-node streams `NodeApi::watch_node` and `PodApi::watch_pods` hand out: a
//! fleet of 10,000 nodes holds two long requests instead of 20,000. The streams keep the
//! per-node watches' meaning (a relist reports what went away as deleted; a pod stream starts
//! with the node's current pods). Single-node mode keeps its own per-node watches.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard},
};

use futures::{
    StreamExt,
    channel::mpsc::{UnboundedSender, unbounded},
    stream::BoxStream,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, runtime::watcher};
use nodepulse_actors::{
    kept_pod::KeptPod,
    ports::{NodeWatchEvent, PodWatchEvent},
    shrink::map_after_removal,
};
use tokio::task::AbortHandle;

use super::{KubeApi, pods::kept_pod, resume::resuming};

/// What one watch's events mean for each node: the per-kind half of a [`Demux`].
pub(crate) trait Router: Send + 'static {
    type Object: Send + 'static;
    type Event: Clone + Send + 'static;
    /// The per-node events one watch event stands for.
    fn step(
        &mut self,
        event: Result<watcher::Event<Self::Object>, watcher::Error>,
    ) -> Vec<(String, Self::Event)>;
    /// What a subscriber arriving now must hear first (a restarted actor's fresh start).
    fn replay(&self, node: &str) -> Vec<Self::Event>;
}

struct Routes<R: Router> {
    router: R,
    /// Several actors of one node may watch the same kind (the pod lifecycle actor and the
    /// volume manager both watch the node's pods). futures' channel, not tokio's: tokio's
    /// allocates a block of 32 events up front, which 10,000 nodes' three idle streams each
    /// held for nothing.
    subscribers: HashMap<String, Vec<UnboundedSender<R::Event>>>,
}

/// Routes one watch's events to per-node subscribers. Routing and subscribing hold the same
/// lock, so a subscriber's replay and the live events after it never overlap or leave a gap.
pub(crate) struct Demux<R: Router> {
    routes: Mutex<Routes<R>>,
}

impl<R: Router> Demux<R> {
    pub(crate) fn new(router: R) -> Self {
        Self {
            routes: Mutex::new(Routes {
                router,
                subscribers: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Routes<R>> {
        // Routing state is updated whole per event; losing a half-routed event to a panic is
        // no worse than the watch dropping it, and the next relist repairs both.
        self.routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A stream of `node`'s events, beside the node's other live streams (a restarted actor's
    /// old stream is dropped with its instance, and pruned here). Unbounded: one node's watch
    /// events are few and each actor drains its stream as it comes.
    pub(crate) fn subscribe(&self, node: &str) -> BoxStream<'static, R::Event> {
        let (sender, receiver) = unbounded();
        let mut routes = self.lock();
        for event in routes.router.replay(node) {
            let _ = sender.unbounded_send(event);
        }
        let streams = routes.subscribers.entry(node.to_owned()).or_default();
        streams.retain(|stream| !stream.is_closed());
        streams.push(sender);
        receiver.boxed()
    }

    /// Hands one watch event to the nodes it concerns.
    pub(crate) fn route(&self, event: Result<watcher::Event<R::Object>, watcher::Error>) {
        let mut routes = self.lock();
        for (node, event) in routes.router.step(event) {
            let Some(streams) = routes.subscribers.get_mut(&node) else {
                continue;
            };
            streams.retain(|stream| stream.unbounded_send(event.clone()).is_ok());
            if streams.is_empty() {
                routes.subscribers.remove(&node);
            }
        }
    }

    /// Nodes with a live stream.
    pub(crate) fn subscribers(&self) -> usize {
        self.lock().subscribers.len()
    }
}

/// The Nodes of the fleet: present, deleted, and after a relist deleted if not listed.
/// Only names are kept: NodeStatusActor reads the Node itself when it (re)registers, so a late
/// subscriber needs no replay, and 10,000 cached Nodes would cost tens of MiB.
pub(crate) struct NodeRouter {
    members: Arc<HashSet<String>>,
    known: HashSet<String>,
    relisted: Option<HashSet<String>>,
}

impl NodeRouter {
    pub(crate) fn new(members: Arc<HashSet<String>>) -> Self {
        Self {
            members,
            known: HashSet::new(),
            relisted: None,
        }
    }
}

impl Router for NodeRouter {
    type Object = Node;
    type Event = NodeWatchEvent;

    fn step(
        &mut self,
        event: Result<watcher::Event<Node>, watcher::Error>,
    ) -> Vec<(String, NodeWatchEvent)> {
        let name_of = |node: &Node| node.metadata.name.clone().unwrap_or_default();
        match event {
            Ok(watcher::Event::Init) => {
                self.relisted = Some(HashSet::new());
                Vec::new()
            }
            Ok(watcher::Event::InitApply(node) | watcher::Event::Apply(node)) => {
                let name = name_of(&node);
                if !self.members.contains(&name) {
                    return Vec::new();
                }
                if let Some(relisted) = self.relisted.as_mut() {
                    relisted.insert(name.clone());
                }
                self.known.insert(name.clone());
                vec![(name, NodeWatchEvent::Present(Box::new(node)))]
            }
            Ok(watcher::Event::Delete(node)) => {
                let name = name_of(&node);
                if self.known.remove(&name) {
                    vec![(name, NodeWatchEvent::Deleted)]
                } else {
                    Vec::new()
                }
            }
            Ok(watcher::Event::InitDone) => {
                let relisted = self.relisted.take().unwrap_or_default();
                let gone: Vec<String> = self.known.difference(&relisted).cloned().collect();
                gone.into_iter()
                    .map(|name| {
                        self.known.remove(&name);
                        (name, NodeWatchEvent::Deleted)
                    })
                    .collect()
            }
            Err(error) => {
                tracing::debug!(%error, "fleet node watch error; the watcher retries");
                Vec::new()
            }
        }
    }

    fn replay(&self, _node: &str) -> Vec<NodeWatchEvent> {
        Vec::new()
    }
}

/// The pods bound to the fleet's nodes, kept per node so that a subscriber (a restarted pod
/// lifecycle actor) starts from the node's current pods, as a fresh per-node watch would.
pub(crate) struct PodRouter {
    members: Arc<HashSet<String>>,
    /// node → (namespace/name → pod), the pods the subscribers were handed (shared, not
    /// copied); a node whose pods are all gone has no entry.
    known: HashMap<String, HashMap<String, KeptPod>>,
    relisted: Option<HashSet<(String, String)>>,
    /// The first list is complete: a subscriber's replay ends with `Listed`.
    listed: bool,
}

impl PodRouter {
    pub(crate) fn new(members: Arc<HashSet<String>>) -> Self {
        Self {
            members,
            known: HashMap::new(),
            relisted: None,
            listed: false,
        }
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pod_node(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|spec| spec.node_name.clone())
}

impl Router for PodRouter {
    type Object = Pod;
    type Event = PodWatchEvent;

    fn step(
        &mut self,
        event: Result<watcher::Event<Pod>, watcher::Error>,
    ) -> Vec<(String, PodWatchEvent)> {
        match event {
            Ok(watcher::Event::Init) => {
                self.relisted = Some(HashSet::new());
                Vec::new()
            }
            Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                let Some(node) = pod_node(&pod).filter(|node| self.members.contains(node)) else {
                    return Vec::new();
                };
                let key = pod_key(&pod);
                if let Some(relisted) = self.relisted.as_mut() {
                    relisted.insert((node.clone(), key.clone()));
                }
                let pod = kept_pod(pod);
                self.known
                    .entry(node.clone())
                    .or_default()
                    .insert(key, pod.clone());
                vec![(node, PodWatchEvent::Applied(pod))]
            }
            Ok(watcher::Event::Delete(pod)) => {
                let Some(node) = pod_node(&pod).filter(|node| self.members.contains(node)) else {
                    return Vec::new();
                };
                if let Some(pods) = self.known.get_mut(&node) {
                    pods.remove(&pod_key(&pod));
                    if pods.is_empty() {
                        self.known.remove(&node);
                    } else {
                        map_after_removal(pods);
                    }
                    map_after_removal(&mut self.known);
                }
                vec![(node, PodWatchEvent::Deleted(kept_pod(pod)))]
            }
            Ok(watcher::Event::InitDone) => {
                let relisted = self.relisted.take().unwrap_or_default();
                let mut gone = Vec::new();
                for (node, pods) in &mut self.known {
                    pods.retain(|key, pod| {
                        let listed = relisted.contains(&(node.clone(), key.clone()));
                        if !listed {
                            gone.push((node.clone(), PodWatchEvent::Deleted(pod.clone())));
                        }
                        listed
                    });
                }
                self.known.retain(|_, pods| !pods.is_empty());
                self.listed = true;
                gone.extend(
                    self.members
                        .iter()
                        .map(|node| (node.clone(), PodWatchEvent::Listed)),
                );
                gone
            }
            Err(error) => {
                tracing::debug!(%error, "fleet pod watch error; the watcher retries");
                Vec::new()
            }
        }
    }

    fn replay(&self, node: &str) -> Vec<PodWatchEvent> {
        self.known
            .get(node)
            .map(|pods| {
                pods.values()
                    .map(|pod| PodWatchEvent::Applied(pod.clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .chain(self.listed.then_some(PodWatchEvent::Listed))
            .collect()
    }
}

/// The fleet's two watches, running until this is dropped.
pub struct SharedWatches {
    nodes: Arc<Demux<NodeRouter>>,
    pods: Arc<Demux<PodRouter>>,
    tasks: Vec<AbortHandle>,
}

impl SharedWatches {
    /// Starts watching every Node and every pod bound to a node (through the main client, as
    /// the per-node watches do), keeping what concerns `members`. Must be called inside a
    /// tokio runtime; the watches run on it.
    pub fn start(api: &KubeApi, members: impl IntoIterator<Item = String>) -> Self {
        let members: Arc<HashSet<String>> = Arc::new(members.into_iter().collect());
        let nodes = Arc::new(Demux::new(NodeRouter::new(Arc::clone(&members))));
        let pods = Arc::new(Demux::new(PodRouter::new(members)));
        let node_watch = resuming(
            watcher(
                Api::<Node>::all(api.main.clone()),
                watcher::Config::default(),
            ),
            api.reachability.recovery(),
        );
        let pod_watch = resuming(
            watcher(
                Api::<Pod>::all(api.main.clone()),
                watcher::Config::default().fields("spec.nodeName!="),
            ),
            api.reachability.recovery(),
        );
        let tasks = vec![
            spawn_routing(node_watch, Arc::clone(&nodes)),
            spawn_routing(pod_watch, Arc::clone(&pods)),
        ];
        Self { nodes, pods, tasks }
    }

    /// `node`'s Node events, as `NodeApi::watch_node` gives them.
    pub fn node(&self, node: &str) -> BoxStream<'static, NodeWatchEvent> {
        self.nodes.subscribe(node)
    }

    /// `node`'s pod events, as `PodApi::watch_pods` gives them.
    pub fn pods(&self, node: &str) -> BoxStream<'static, PodWatchEvent> {
        self.pods.subscribe(node)
    }

    /// Nodes with a live Node stream and with a live pod stream.
    pub fn subscribers(&self) -> (usize, usize) {
        (self.nodes.subscribers(), self.pods.subscribers())
    }
}

fn spawn_routing<R: Router>(
    watch: impl futures::Stream<Item = Result<watcher::Event<R::Object>, watcher::Error>>
    + Send
    + 'static,
    demux: Arc<Demux<R>>,
) -> AbortHandle {
    tokio::spawn(async move {
        let mut watch = std::pin::pin!(watch);
        while let Some(event) = watch.next().await {
            demux.route(event);
        }
    })
    .abort_handle()
}

impl Drop for SharedWatches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
#[path = "shared_watch_tests.rs"]
mod tests;
