//! The CRI engine's `PodsView` against the in-memory runtime, on paused time: a pod appears
//! with its sandbox and container IDs once it runs, follows its restarts, and leaves the view
//! when the pod is gone.

use std::{path::Path, time::Duration};

use serde_json::json;

use super::tests::{Harness, app, deleted, phase, pod};
use nodepulse_actors::{pods::PodLifecycleProvider, ports::ContainerState};

#[tokio::test(start_paused = true)]
async fn a_running_pod_appears_in_the_view_and_a_removed_one_leaves_it() {
    let mut harness = Harness::new();
    let mut view = harness.pods.pods_view();
    assert!(view.snapshot().is_empty());
    let running = pod("Always", json!({}));
    harness.apply(&running);
    let status = harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;

    let snapshot = view.snapshot();
    let record = snapshot.by_uid("u1").expect("the pod is in the view");
    assert_eq!(
        (record.namespace.as_str(), record.name.as_str()),
        ("default", "web")
    );
    let sandbox = harness.runtime.sandbox_configs()[0].clone();
    assert!(record.sandbox_id().is_some_and(|id| !id.is_empty()));
    assert!(record.sandboxes[0].ready);
    let container = snapshot
        .container("default", "web", "app")
        .expect("its container");
    assert_eq!(container.state, ContainerState::Running);
    assert_eq!(
        app(&status)["containerID"],
        format!("containerd://{}", container.id),
        "the ID the pod status reports"
    );
    assert_eq!(container.log_path, Path::new("app/0.log"));
    assert_eq!(container.restart_count, 0);
    assert!(container.image_ref.ends_with(super::tests::IMAGE));
    assert!(container.started_at.is_some() && container.exit_code.is_none());
    assert!(sandbox.log_directory.ends_with("default_web_u1"));

    harness.runtime.exit("app", 1);
    harness
        .status_where("restarted", |s| {
            app(s)["restartCount"] == 1 && app(s)["state"]["running"].is_object()
        })
        .await;
    let snapshot = view.snapshot();
    let record = snapshot.by_uid("u1").unwrap();
    assert_eq!(record.container("app").unwrap().restart_count, 1);
    let previous = record.previous("app").expect("the instance that exited");
    assert_eq!(
        (previous.state, previous.exit_code),
        (ContainerState::Exited, Some(1))
    );

    let deleting = deleted(&running, 30);
    harness.apply(&deleting);
    harness.wait_terminated().await;
    assert!(view.snapshot().by_uid("u1").unwrap().deleting);
    harness.pods.pod_deleted(&deleting);
    tokio::time::timeout(Duration::from_secs(60), async {
        while view.snapshot().by_uid("u1").is_some() {
            assert!(view.changed().await, "the engine still publishes");
        }
    })
    .await
    .expect("the pod leaves the view");
    assert!(view.snapshot().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_relist_that_finds_nothing_new_publishes_no_snapshot() {
    let mut harness = Harness::new();
    let view = harness.pods.pods_view();
    harness.apply(&pod("Always", json!({})));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = view.snapshot();
    // Many relists later, with nothing changed in the runtime.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(std::sync::Arc::ptr_eq(&settled, &view.snapshot()));
}
