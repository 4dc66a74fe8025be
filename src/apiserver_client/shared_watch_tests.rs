//! The demultiplexer on its own: events of one watch reach exactly the node they name, a
//! relist reports what went away, a late pod subscriber starts from the node's pods, and
//! nothing is kept for nodes outside the fleet.

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;

fn members(names: &[&str]) -> Arc<HashSet<String>> {
    Arc::new(names.iter().map(|name| (*name).to_owned()).collect())
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({ "metadata": { "name": name } })).expect("a node")
}

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "nodeName": node, "containers": [] },
    }))
    .expect("a pod")
}

/// Everything the stream holds now, without waiting.
fn drain<E>(stream: &mut BoxStream<'static, E>) -> Vec<E> {
    let mut events = Vec::new();
    while let Some(Some(event)) = stream.next().now_or_never() {
        events.push(event);
    }
    events
}

fn node_names(events: &[NodeWatchEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            NodeWatchEvent::Present(node) => {
                format!("present {}", node.metadata.name.as_deref().unwrap_or(""))
            }
            NodeWatchEvent::Deleted => "deleted".to_owned(),
        })
        .collect()
}

fn pod_names(events: &[PodWatchEvent]) -> Vec<String> {
    let mut names: Vec<String> = events
        .iter()
        .map(|event| match event {
            PodWatchEvent::Applied(pod) => format!("applied {}", pod_key(&pod.pod())),
            PodWatchEvent::Deleted(pod) => format!("deleted {}", pod_key(&pod.pod())),
            PodWatchEvent::Listed => "listed".to_owned(),
        })
        .collect();
    names.sort();
    names
}

#[test]
fn node_events_reach_only_the_node_they_name() {
    let demux = Demux::new(NodeRouter::new(members(&["a", "b"])));
    let (mut a, mut b) = (demux.subscribe("a"), demux.subscribe("b"));
    demux.route(Ok(Event::Apply(node("a"))));
    demux.route(Ok(Event::Apply(node("outsider"))));
    demux.route(Ok(Event::Apply(node("b"))));
    demux.route(Ok(Event::Delete(node("a"))));
    assert_eq!(node_names(&drain(&mut a)), ["present a", "deleted"]);
    assert_eq!(node_names(&drain(&mut b)), ["present b"]);
}

#[test]
fn a_relist_reports_the_nodes_that_went_away_as_deleted() {
    let demux = Demux::new(NodeRouter::new(members(&["a", "b"])));
    let (mut a, mut b) = (demux.subscribe("a"), demux.subscribe("b"));
    demux.route(Ok(Event::Apply(node("a"))));
    demux.route(Ok(Event::Apply(node("b"))));
    drain(&mut a);
    drain(&mut b);
    // A reconnect: the relist holds only "b".
    demux.route(Ok(Event::Init));
    demux.route(Ok(Event::InitApply(node("b"))));
    demux.route(Ok(Event::InitDone));
    assert_eq!(node_names(&drain(&mut a)), ["deleted"]);
    assert_eq!(node_names(&drain(&mut b)), ["present b"]);
    // A node never seen is not reported deleted by a relist.
    demux.route(Ok(Event::Init));
    demux.route(Ok(Event::InitApply(node("b"))));
    demux.route(Ok(Event::InitDone));
    assert!(drain(&mut a).is_empty());
}

#[test]
fn two_subscribers_of_one_node_both_hear_it_and_a_dropped_one_is_forgotten() {
    let demux = Demux::new(NodeRouter::new(members(&["a"])));
    let mut first = demux.subscribe("a");
    let mut second = demux.subscribe("a");
    demux.route(Ok(Event::Apply(node("a"))));
    assert_eq!(node_names(&drain(&mut first)), ["present a"]);
    assert_eq!(node_names(&drain(&mut second)), ["present a"]);
    assert_eq!(demux.subscribers(), 1);
    drop(first);
    demux.route(Ok(Event::Apply(node("a"))));
    assert_eq!(node_names(&drain(&mut second)), ["present a"]);
    drop(second);
    demux.route(Ok(Event::Apply(node("a"))));
    assert_eq!(demux.subscribers(), 0);
}

#[test]
fn pod_events_are_routed_by_spec_node_name() {
    let demux = Demux::new(PodRouter::new(members(&["a", "b"])));
    let (mut a, mut b) = (demux.subscribe("a"), demux.subscribe("b"));
    demux.route(Ok(Event::Apply(pod("web", "a"))));
    demux.route(Ok(Event::Apply(pod("db", "b"))));
    demux.route(Ok(Event::Apply(pod("elsewhere", "outsider"))));
    demux.route(Ok(Event::Delete(pod("web", "a"))));
    assert_eq!(
        pod_names(&drain(&mut a)),
        ["applied default/web", "deleted default/web"]
    );
    assert_eq!(pod_names(&drain(&mut b)), ["applied default/db"]);
}

#[test]
fn a_fleet_node_keeps_its_pods_without_their_managed_fields() {
    let demux = Demux::new(PodRouter::new(members(&["n1"])));
    let mut n1 = demux.subscribe("n1");
    demux.route(Ok(Event::Apply(super::super::pods::tests::applied_pod())));
    let events = drain(&mut n1);
    let [PodWatchEvent::Applied(pod)] = &events[..] else {
        panic!("one applied pod: {events:?}");
    };
    let pod = pod.pod();
    assert_eq!(pod.metadata.managed_fields, None);
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
}

#[test]
fn a_late_pod_subscriber_starts_from_the_nodes_current_pods() {
    let demux = Demux::new(PodRouter::new(members(&["a"])));
    demux.route(Ok(Event::Apply(pod("web", "a"))));
    demux.route(Ok(Event::Apply(pod("db", "a"))));
    demux.route(Ok(Event::Delete(pod("db", "a"))));
    let mut restarted = demux.subscribe("a");
    assert_eq!(pod_names(&drain(&mut restarted)), ["applied default/web"]);
    demux.route(Ok(Event::Apply(pod("cache", "a"))));
    assert_eq!(pod_names(&drain(&mut restarted)), ["applied default/cache"]);
}

#[test]
fn a_pod_relist_reports_the_pods_that_went_away_as_deleted() {
    let demux = Demux::new(PodRouter::new(members(&["a", "b"])));
    let (mut a, mut b) = (demux.subscribe("a"), demux.subscribe("b"));
    demux.route(Ok(Event::Apply(pod("web", "a"))));
    demux.route(Ok(Event::Apply(pod("db", "b"))));
    drain(&mut a);
    drain(&mut b);
    demux.route(Ok(Event::Init));
    demux.route(Ok(Event::InitApply(pod("db", "b"))));
    demux.route(Ok(Event::InitDone));
    assert_eq!(pod_names(&drain(&mut a)), ["deleted default/web", "listed"]);
    assert_eq!(pod_names(&drain(&mut b)), ["applied default/db", "listed"]);
    let mut fresh = demux.subscribe("a");
    assert_eq!(
        pod_names(&drain(&mut fresh)),
        ["listed"],
        "no pod is replayed for a node whose pods are all gone, only that the list is complete"
    );
}
