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

/// Go's `Event` types serialise struct fields (`source`, `regarding`) even when empty, a zero
/// `metav1.Time`/`MicroTime` as `null`, and core's reporter strings without `omitempty`
/// (events.k8s.io/v1's have it): `staging/src/k8s.io/api/{core,events}/v1/types.go`. Decoded into
/// the type, an unknown field is gone and a time is written back in UTC (`metav1.Time`).
#[tokio::test]
async fn events_read_back_with_the_fields_go_always_serialises() {
    let cluster = Cluster::start().await;
    let name = unique("evbare");
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "Node", "name": unique("evnode"), "apiVersion": "v1"},
        "reason": "NodeReady", "message": "node is ready", "type": "Normal",
        "lastTimestamp": "2026-01-01T01:00:00+01:00", "colour": "red"});
    let created = cluster
        .post("/api/v1/namespaces/default/events", &event)
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let core = cluster
        .get(&format!("/api/v1/namespaces/default/events/{name}"))
        .await;
    for (field, expected) in [
        ("source", json!({})),
        ("firstTimestamp", json!(null)),
        ("lastTimestamp", json!("2026-01-01T00:00:00Z")),
        ("eventTime", json!(null)),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
    ] {
        assert_eq!(
            core.body.get(field),
            Some(&expected),
            "core {field}: {:?}",
            core.body
        );
    }
    assert_eq!(core.body.get("count"), None, "count is omitempty");
    assert_eq!(
        core.body.get("colour"),
        None,
        "a field the Event type lacks is dropped"
    );
    let v1 = cluster
        .get(&format!(
            "/apis/events.k8s.io/v1/namespaces/default/events/{name}"
        ))
        .await;
    for (field, expected) in [
        ("deprecatedSource", json!({})),
        ("deprecatedFirstTimestamp", json!(null)),
        ("deprecatedLastTimestamp", json!("2026-01-01T00:00:00Z")),
        ("eventTime", json!(null)),
    ] {
        assert_eq!(
            v1.body.get(field),
            Some(&expected),
            "v1 {field}: {:?}",
            v1.body
        );
    }
    for field in [
        "reportingController",
        "reportingInstance",
        "deprecatedCount",
    ] {
        assert_eq!(
            v1.body.get(field),
            None,
            "v1 {field} is omitempty: {:?}",
            v1.body
        );
    }
    assert_eq!(v1.body["regarding"]["kind"], "Node");
}

/// client-go's recorder folds a repeated event into one object: a strategic-merge PATCH of
/// `count`, `lastTimestamp` and `message` on the existing name, which kube-apiserver answers
/// 200 with the merged Event; the PATCH of an Event that is gone answers 404 NotFound, on
/// which the recorder creates it anew (`tools/record/event.go` `recordEvent`).
#[tokio::test]
async fn event_count_is_patched_in_place_and_a_missing_event_is_not_found() {
    let cluster = Cluster::start().await;
    let name = unique("evcount");
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "Node", "name": unique("evnode"), "apiVersion": "v1"},
        "reason": "Rebooted", "message": "first", "type": "Warning", "count": 1,
        "source": {"component": "nodepulse"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"});
    let path = "/api/v1/namespaces/default/events";
    let created = cluster.post(path, &event).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let patch = json!({"count": 2, "lastTimestamp": "2026-01-01T00:05:00Z", "message": "again"});
    let patched = cluster
        .patch(
            &format!("{path}/{name}"),
            "application/strategic-merge-patch+json",
            &patch,
        )
        .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    for (field, expected) in [
        ("count", json!(2)),
        ("lastTimestamp", json!("2026-01-01T00:05:00Z")),
        ("firstTimestamp", json!("2026-01-01T00:00:00Z")),
        ("message", json!("again")),
        ("reason", json!("Rebooted")),
    ] {
        assert_eq!(
            patched.body.get(field),
            Some(&expected),
            "{field}: {:?}",
            patched.body
        );
    }
    assert_ne!(
        patched.body["metadata"]["resourceVersion"], created.body["metadata"]["resourceVersion"],
        "a PATCH that changes the Event writes a new resourceVersion"
    );
    let missing = cluster
        .patch(
            &format!("{path}/{}", unique("evgone")),
            "application/strategic-merge-patch+json",
            &patch,
        )
        .await;
    assert_eq!(missing.status, 404, "{:?}", missing.body);
    assert_eq!(missing.body["reason"], "NotFound", "{:?}", missing.body);
}
