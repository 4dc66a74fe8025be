//! Events through both APIs: `events.k8s.io/v1` writes are visible as core `v1` events, with the
//! involvedObject field selectors `kubectl describe` uses.

use serde_json::json;

use crate::common::{Cluster, unique};

#[tokio::test]
async fn events_v1_are_visible_as_core_events_selected_by_involved_object() {
    let cluster = Cluster::start().await;
    let node = unique("evnode");
    let name = unique("ev");
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "nodepulse", "reportingInstance": node,
        "action": "Heartbeat", "reason": "NodeReady", "note": "node is ready", "type": "Normal",
        "regarding": {"kind": "Node", "name": node, "apiVersion": "v1"}});
    let created = cluster
        .post("/apis/events.k8s.io/v1/namespaces/default/events", &event)
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["note"], "node is ready");
    let core = cluster.get(&format!("/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3D{node}")).await;
    let items = core.body["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{:?}", core.body);
    assert_eq!(
        (items[0]["message"].as_str(), items[0]["reason"].as_str()),
        (Some("node is ready"), Some("NodeReady"))
    );
    let v1 = cluster
        .get(&format!(
            "/apis/events.k8s.io/v1/namespaces/default/events/{name}"
        ))
        .await;
    assert_eq!(v1.body["regarding"]["name"], node.as_str());
}
