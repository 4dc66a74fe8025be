//! Watch: event types, resume from a resourceVersion, 410 Expired, bookmarks, selector
//! transitions and timeoutSeconds.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Cluster, StreamExt, rv, test_config, unique};
use nodepulse_emulator::WatchConfig;

const WAIT: Duration = Duration::from_secs(15);

async fn next_event(events: &mut (impl futures::Stream<Item = Value> + Unpin)) -> Value {
    tokio::time::timeout(WAIT, events.next())
        .await
        .expect("event before timeout")
        .expect("stream still open")
}

/// The next event that is not a BOOKMARK.
async fn next_change(events: &mut (impl futures::Stream<Item = Value> + Unpin)) -> Value {
    loop {
        let event = next_event(events).await;
        if event["type"] != "BOOKMARK" {
            return event;
        }
    }
}

/// Changes up to and including the first one `last` accepts. Other writers (the controllers of
/// a real control plane, and the emulator's) may modify a Node in between, so tests look for
/// the events their own writes cause instead of expecting an exact sequence.
async fn changes_until(
    events: &mut (impl futures::Stream<Item = Value> + Unpin),
    last: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let event = next_change(events).await;
        let done = last(&event);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn watch_streams_added_modified_deleted_from_a_resource_version() {
    let cluster = Cluster::start().await;
    let name = unique("watch");
    let label = unique("wl");
    let list = cluster.get("/api/v1/nodes?limit=1").await;
    let mut events = Box::pin(
        cluster
            .watch(&format!(
                "/api/v1/nodes?watch=true&resourceVersion={}&labelSelector=w%3D{label}",
                rv(&list.body)
            ))
            .await,
    );
    let created = cluster
        .post(
            "/api/v1/nodes",
            &json!({"metadata": {"name": name, "labels": {"w": label}}}),
        )
        .await;
    assert_eq!(created.status, 201);
    let path = format!("/api/v1/nodes/{name}");
    cluster
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"annotations": {"a": "1"}}}),
        )
        .await;
    cluster.delete(&path, None).await;
    let seen = changes_until(&mut events, |e| e["type"] == "DELETED").await;
    for event in &seen {
        assert_eq!(event["object"]["metadata"]["name"], name.as_str());
        assert_eq!(event["object"]["kind"], "Node");
    }
    let types = kinds(&seen);
    assert_eq!(types.first(), Some(&"ADDED"), "{types:?}");
    assert!(
        types[1..types.len() - 1].iter().all(|t| *t == "MODIFIED"),
        "{types:?}"
    );
    assert!(
        seen.iter()
            .any(|e| e["type"] == "MODIFIED" && e["object"]["metadata"]["annotations"]["a"] == "1"),
        "our annotation arrives as a MODIFIED event: {types:?}"
    );
}

#[tokio::test]
async fn watch_resumes_after_a_resource_version_without_replaying_older_events() {
    let cluster = Cluster::start().await;
    let label = unique("resume");
    let (first, second) = (unique("first"), unique("second"));
    let a = cluster
        .post(
            "/api/v1/nodes",
            &json!({"metadata": {"name": first, "labels": {"r": label}}}),
        )
        .await;
    cluster
        .post(
            "/api/v1/nodes",
            &json!({"metadata": {"name": second, "labels": {"r": label}}}),
        )
        .await;
    let mut events = Box::pin(
        cluster
            .watch(&format!(
                "/api/v1/nodes?watch=true&resourceVersion={}&labelSelector=r%3D{label}",
                rv(&a.body)
            ))
            .await,
    );
    // Controllers may modify `first` after its creation; what must not come back is its ADDED.
    let seen = changes_until(&mut events, |e| {
        e["type"] == "ADDED" && e["object"]["metadata"]["name"] == second.as_str()
    })
    .await;
    for event in &seen {
        assert!(rv(&event["object"]) > rv(&a.body), "replayed: {event}");
        assert!(
            !(event["type"] == "ADDED" && event["object"]["metadata"]["name"] == first.as_str()),
            "the creation at the resume version was replayed: {:?}",
            kinds(&seen)
        );
    }
    cluster
        .delete(&format!("/api/v1/nodes/{first}"), None)
        .await;
    cluster
        .delete(&format!("/api/v1/nodes/{second}"), None)
        .await;
}

#[tokio::test]
async fn watch_without_resource_version_starts_with_the_current_state() {
    let cluster = Cluster::start().await;
    let label = unique("state");
    let name = unique("existing");
    cluster
        .post(
            "/api/v1/nodes",
            &json!({"metadata": {"name": name, "labels": {"s": label}}}),
        )
        .await;
    let mut events = Box::pin(
        cluster
            .watch(&format!(
                "/api/v1/nodes?watch=true&labelSelector=s%3D{label}"
            ))
            .await,
    );
    let event = next_change(&mut events).await;
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some(name.as_str()))
    );
}

#[tokio::test]
async fn watch_from_a_version_older_than_the_window_gets_410_expired() {
    let mut config = test_config();
    config.watch = WatchConfig {
        history: 20,
        ..WatchConfig::default()
    };
    let cluster = match std::env::var_os(crate::common::REAL_CLUSTER_ENV) {
        Some(_) => Cluster::start().await,
        None => crate::common::Cluster::emulator_only("watch_410", config)
            .await
            .expect("emulator"),
    };
    if !cluster.is_real() {
        for _ in 0..30 {
            cluster.create_node(&unique("churn")).await;
        }
    }
    // resourceVersion 1 is long compacted on a real cluster, and outside the emulator's window here.
    let mut events = Box::pin(
        cluster
            .watch("/api/v1/nodes?watch=true&resourceVersion=1")
            .await,
    );
    let event = next_event(&mut events).await;
    assert_eq!(event["type"], "ERROR");
    assert_eq!(
        (
            event["object"]["code"].as_u64(),
            event["object"]["reason"].as_str()
        ),
        (Some(410), Some("Expired"))
    );
    assert!(
        event["object"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("too old resource version: 1 (")),
        "{}",
        event["object"]
    );
}

#[tokio::test]
async fn bookmarks_carry_the_current_resource_version() {
    let mut config = test_config();
    config.watch.bookmark_interval = Duration::from_millis(200);
    let Some(cluster) =
        Cluster::emulator_only("bookmarks_carry_the_current_resource_version", config).await
    else {
        return;
    };
    let list = cluster.get("/api/v1/nodes").await;
    let label = unique("bm");
    let mut events = Box::pin(cluster.watch(&format!("/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={}&labelSelector=b%3D{label}", rv(&list.body))).await);
    let other = cluster.create_node(&unique("unrelated")).await;
    let bookmark = loop {
        let event = next_event(&mut events).await;
        if event["type"] == "BOOKMARK" && rv(&event["object"]) >= rv(&other) {
            break event;
        }
    };
    assert_eq!(bookmark["object"]["kind"], "Node");
}

#[tokio::test]
async fn selector_transitions_arrive_as_added_and_deleted() {
    let cluster = Cluster::start().await;
    let name = unique("transit");
    let label = unique("t");
    let node = cluster.create_node(&name).await;
    let mut events = Box::pin(
        cluster
            .watch(&format!(
                "/api/v1/nodes?watch=true&resourceVersion={}&labelSelector=t%3D{label}",
                rv(&node)
            ))
            .await,
    );
    let path = format!("/api/v1/nodes/{name}");
    cluster
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"t": label}}}),
        )
        .await;
    cluster
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"t": "other"}}}),
        )
        .await;
    let seen = changes_until(&mut events, |e| e["type"] == "DELETED").await;
    let types = kinds(&seen);
    assert_eq!(types.first(), Some(&"ADDED"), "{types:?}");
    assert!(
        types[1..types.len() - 1].iter().all(|t| *t == "MODIFIED"),
        "{types:?}"
    );
    cluster.delete(&path, None).await;
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let cluster = Cluster::start().await;
    let list = cluster.get("/api/v1/nodes?limit=1").await;
    let mut events = Box::pin(cluster.watch(&format!("/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion={}&fieldSelector=metadata.name%3D{}", rv(&list.body), unique("none"))).await);
    let ended = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("stream ends before the test timeout");
    assert!(ended.is_none(), "no events expected, got {ended:?}");
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_an_annotated_bookmark() {
    let cluster = Cluster::start().await;
    let label = unique("sl");
    let name = unique("listed");
    cluster
        .post(
            "/api/v1/nodes",
            &json!({"metadata": {"name": name, "labels": {"l": label}}}),
        )
        .await;
    let mut events = Box::pin(
        cluster
            .watch(&format!("/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&labelSelector=l%3D{label}"))
            .await,
    );
    let added = next_event(&mut events).await;
    assert_eq!(
        (
            added["type"].as_str(),
            added["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some(name.as_str()))
    );
    let end = next_event(&mut events).await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}
