//! Garbage collection: the kubelet's rules on one listing (orphans, one dead container per
//! name, old sandboxes), and the provider removing a pod deleted while it was down — only
//! once the pod list is complete — with its log directory, then staying idle.

use std::{sync::Arc, time::Duration};

use serde_json::json;

use super::{GC_PERIOD, GcPlan, Orphan, plan};
use crate::provider::tests::{Harness, phase, pod};
use nodepulse_actors::{
    pods::PodLifecycleProvider,
    ports::{
        ContainerState, ContainerSummary, Labels, SandboxMetadata, SandboxState, SandboxSummary,
    },
};

fn labels(uid: &str, name: Option<&str>) -> Labels {
    let mut labels: Labels = [("io.kubernetes.pod.uid".to_owned(), uid.to_owned())].into();
    if let Some(name) = name {
        labels.insert("io.kubernetes.container.name".to_owned(), name.to_owned());
    }
    labels
}

fn sandbox(id: &str, uid: &str, ready: bool, created_at: i64) -> SandboxSummary {
    SandboxSummary {
        id: id.to_owned(),
        state: if ready {
            SandboxState::Ready
        } else {
            SandboxState::NotReady
        },
        created_at,
        labels: labels(uid, None),
        metadata: SandboxMetadata::default(),
        annotations: Labels::new(),
    }
}

fn container(
    id: &str,
    sandbox: &str,
    uid: &str,
    name: &str,
    state: ContainerState,
    created_at: i64,
) -> ContainerSummary {
    ContainerSummary {
        id: id.to_owned(),
        sandbox_id: sandbox.to_owned(),
        name: name.to_owned(),
        state,
        created_at,
        labels: labels(uid, Some(name)),
        annotations: [(
            "io.kubernetes.pod.terminationGracePeriod".to_owned(),
            "7".to_owned(),
        )]
        .into(),
        attempt: 0,
        image: String::new(),
        image_ref: String::new(),
    }
}

#[test]
fn a_known_pod_keeps_its_newest_dead_container_per_name_and_its_newest_sandbox() {
    use ContainerState::{Exited, Running};
    let sandboxes = [
        sandbox("s-old", "u1", false, 1),
        sandbox("s-older", "u1", false, 0),
        sandbox("s-new", "u1", true, 2),
    ];
    let containers = [
        container("c1", "s-older", "u1", "app", Exited, 1),
        container("c2", "s-old", "u1", "app", Exited, 2),
        container("c3", "s-new", "u1", "app", Exited, 3),
        container("c4", "s-new", "u1", "app", Running, 4),
        container("c5", "s-new", "u1", "side", Exited, 5),
    ];
    let plan = plan(&sandboxes, &containers, false, |_| Some(true));
    assert_eq!(
        plan,
        GcPlan {
            orphans: vec![],
            dead_containers: vec!["c2".to_owned(), "c1".to_owned()],
            dead_sandboxes: vec!["s-old".to_owned(), "s-older".to_owned()],
        }
    );
}

#[test]
fn an_old_sandbox_still_holding_the_kept_dead_container_stays() {
    let sandboxes = [
        sandbox("s-old", "u1", false, 1),
        sandbox("s-new", "u1", true, 2),
    ];
    let containers = [container(
        "c1",
        "s-old",
        "u1",
        "app",
        ContainerState::Exited,
        1,
    )];
    let plan = plan(&sandboxes, &containers, false, |_| Some(true));
    assert_eq!(plan, GcPlan::default());
}

#[test]
fn an_orphan_loses_everything_and_a_pod_being_synced_is_left_alone() {
    let sandboxes = [
        sandbox("s-gone", "gone", true, 1),
        sandbox("s-busy", "busy", false, 1),
        sandbox("s-busy-old", "busy", false, 0),
    ];
    let containers = [
        container("run", "s-gone", "gone", "app", ContainerState::Running, 1),
        container("dead", "s-gone", "gone", "init", ContainerState::Exited, 0),
        container(
            "loose",
            "s-removed",
            "gone",
            "app",
            ContainerState::Exited,
            0,
        ),
    ];
    let plan = plan(&sandboxes, &containers, false, |uid| match uid {
        "gone" => Some(false),
        _ => None,
    });
    assert_eq!(
        plan.orphans,
        [Orphan {
            uid: "gone".to_owned(),
            running: vec![("run".to_owned(), Duration::from_secs(7))],
            sandboxes: vec!["s-gone".to_owned()],
            loose: vec!["loose".to_owned()],
        }]
    );
    assert!(plan.dead_sandboxes.is_empty(), "{plan:?}");
}

fn sourced(id: &str, uid: &str, source: &str) -> SandboxSummary {
    let mut sandbox = sandbox(id, uid, true, 1);
    sandbox
        .annotations
        .insert("kubernetes.io/config.source".to_owned(), source.to_owned());
    sandbox
}

#[test]
fn a_static_pod_of_a_kubelet_is_not_taken_for_an_orphan() {
    let sandboxes = [
        sourced("s-etcd", "static-uid", "file"),
        sourced("s-api", "gone", "api"),
    ];
    let plan = plan(&sandboxes, &[], false, |_| Some(false));
    let orphans: Vec<&str> = plan.orphans.iter().map(|o| o.uid.as_str()).collect();
    assert_eq!(orphans, ["gone"]);
}

#[test]
fn a_node_with_a_static_source_collects_the_static_pods_no_source_has() {
    let sandboxes = [
        sourced("s-file", "removed-manifest", "file"),
        sourced("s-http", "removed-from-url", "http"),
        sourced("s-kept", "still-there", "file"),
    ];
    let plan = plan(&sandboxes, &[], true, |uid| Some(uid == "still-there"));
    let orphans: Vec<&str> = plan.orphans.iter().map(|o| o.uid.as_str()).collect();
    assert_eq!(orphans, ["removed-from-url", "removed-manifest"]);
}

#[tokio::test(start_paused = true)]
async fn a_pod_deleted_while_down_is_removed_once_the_list_is_complete_then_a_pass_a_period() {
    let mut first = Harness::new();
    let gone = pod("Always", json!({}));
    let mut kept = pod("Always", json!({}));
    kept.metadata.uid = Some("u2".to_owned());
    kept.metadata.name = Some("kept".to_owned());
    first.apply(&gone);
    first.apply(&kept);
    for _ in 0..2 {
        first
            .status_where("Running", |s| phase(s) == "Running")
            .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = first.pods.engine.settings.pod_logs_dir.clone();
    let runtime = Arc::clone(&first.runtime);
    assert_eq!(runtime.states("app").len(), 2, "both pods run");
    // The first process ends; what runs keeps running (its directories stay for the second).
    first.pods.stop();

    // A new process over the same runtime; the API lists `kept` only, and says so last.
    let mut second = Harness::over(Arc::clone(&runtime));
    second.pods.engine_mut().settings.pod_logs_dir = logs.clone();
    second.apply(&kept);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        runtime.count("RemovePodSandbox"),
        0,
        "nothing before the list is complete"
    );
    assert_eq!(runtime.states("app").len(), 2);

    second.pods.pods_listed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = runtime.calls();
    assert_eq!(
        runtime.states("app"),
        [ContainerState::Running],
        "only `kept` is left: {calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("StopContainer") && c.ends_with(" 30s")),
        "the orphan's container is stopped with its pod's grace: {calls:?}"
    );
    assert_eq!(runtime.count("RemovePodSandbox"), 1);
    let dirs: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        dirs,
        ["default_kept_u2"],
        "the orphan's log directory is gone"
    );

    tokio::time::sleep(GC_PERIOD * 5).await;
    let passes = second.pods.engine.core().gc_passes;
    assert!(
        (5..=7).contains(&passes),
        "one pass at the list, then one a period while a pod is left: {passes}"
    );
}
