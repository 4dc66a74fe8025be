//! What the runtime's handlers can do, through the CRI provider, against the in-memory runtime
//! on paused time and a real pods directory: `hostUsers: false` refused with the kubelet's
//! message where no handler can, given its own block where one can, and the block read back
//! from disk after a restart when the sandbox has to be made again; `recursiveReadOnly:
//! Enabled` refused where the handler cannot, and passed to CreateContainer where it can.

use std::{path::Path, sync::Arc, time::Duration};

use nodepulse_actors::{
    pods::{PodLifecycleProvider, PodUpdate},
    ports::{
        RuntimeHandler, UserNamespace,
        fakes::{container_runtime::FakeRuntime, paused_wall_clock},
    },
    runtime_probe::{CapabilitiesView, RuntimeCapabilities},
};
use serde_json::json;

use super::{
    CriPods,
    tests::{Harness, IMAGE, phase, pod, waiting_message, waiting_reason},
    userns::MAPPINGS_FILE,
};

fn view(handlers: Vec<RuntimeHandler>) -> Arc<CapabilitiesView> {
    let view = Arc::new(CapabilitiesView::default());
    view.set(RuntimeCapabilities {
        handlers,
        features: None,
    });
    view
}

fn default_handler(user_namespaces: bool) -> RuntimeHandler {
    RuntimeHandler {
        name: String::new(),
        supports_recursive_read_only_mounts: false,
        supports_user_namespaces: user_namespaces,
    }
}

fn harness(runtime: Arc<FakeRuntime>, root: &Path, view: Arc<CapabilitiesView>) -> Harness {
    let root = root.to_owned();
    Harness::build(
        runtime,
        None,
        move |settings| settings.root_dir = root,
        move |pods: CriPods| pods.with_runtime_capabilities(view),
    )
}

fn fresh_runtime() -> Arc<FakeRuntime> {
    Arc::new(FakeRuntime::new(paused_wall_clock()).with_image(IMAGE))
}

/// Ticks until an Event `wanted` was asked for.
async fn wait_event(h: &mut Harness, wanted: &str) {
    let started = tokio::time::Instant::now();
    while !h.events().iter().any(|event| event == wanted) {
        h.updates
            .extend(h.pods.tick(nodepulse_actors::clock::system()()));
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no Event {wanted:?}; got {:?}",
            h.events()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn host_users_false() -> k8s_openapi::api::core::v1::Pod {
    pod("Always", json!({"hostUsers": false}))
}

#[tokio::test(start_paused = true)]
async fn a_host_users_false_pod_is_refused_when_no_handler_can_and_never_reaches_the_runtime() {
    let root = tempfile::tempdir().unwrap();
    for (handlers, message) in [
        (
            Vec::new(),
            "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
        ),
        (
            vec![default_handler(false)],
            "can't set `spec.hostUsers: false`, runtime does not support user namespaces",
        ),
        (
            vec![RuntimeHandler {
                name: "kata".into(),
                ..default_handler(true)
            }],
            "can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known",
        ),
    ] {
        let mut h = harness(fresh_runtime(), root.path(), view(handlers));
        h.apply(&host_users_false());
        wait_event(
            &mut h,
            &format!("Warning FailedCreatePodSandBox: Failed to create pod sandbox: {message}"),
        )
        .await;
        assert!(h.runtime.sandbox_configs().is_empty(), "no sandbox made");
        assert!(!root.path().join("pods/u1").join(MAPPINGS_FILE).exists());
    }
}

#[tokio::test(start_paused = true)]
async fn a_host_users_false_pod_gets_its_own_block_and_keeps_it_across_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let supported = || view(vec![default_handler(true)]);
    let mut h = harness(fresh_runtime(), root.path(), supported());
    h.apply(&host_users_false());
    h.status_where("the pod runs", |s| phase(s) == "Running")
        .await;
    let configs = h.runtime.sandbox_configs();
    let Some(UserNamespace::Pod { uids, gids }) = configs[0].user_namespace.clone() else {
        panic!("a pod user namespace, got {:?}", configs[0].user_namespace);
    };
    assert_eq!(uids, gids);
    assert_eq!(
        (uids.len(), uids[0].container_id, uids[0].length),
        (1, 0, 65_536)
    );
    assert!(uids[0].host_id >= 65_536, "host ID 0 is never mapped");
    let record = std::fs::read_to_string(root.path().join("pods/u1").join(MAPPINGS_FILE)).unwrap();
    assert!(
        record.contains(&format!("\"hostId\":{}", uids[0].host_id)),
        "{record}"
    );
    drop(h);

    // A new process over a runtime that lost the sandbox (a reboot): the block on disk.
    let runtime = fresh_runtime();
    let mut h = harness(Arc::clone(&runtime), root.path(), supported());
    h.apply(&host_users_false());
    h.status_where("the pod runs again", |s| phase(s) == "Running")
        .await;
    assert_eq!(
        runtime.sandbox_configs()[0].user_namespace,
        Some(UserNamespace::Pod {
            uids: uids.clone(),
            gids: uids
        })
    );

    // A pod that does not ask gets the host's, as the kubelet's NODE mode.
    let mut plain = pod("Always", json!({}));
    plain.metadata.uid = Some("u2".into());
    plain.metadata.name = Some("plain".into());
    h.apply(&plain);
    let started = tokio::time::Instant::now();
    while runtime.sandbox_configs().len() < 2 {
        h.updates
            .extend(h.pods.tick(nodepulse_actors::clock::system()()));
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "second sandbox"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let node_mode = runtime
        .sandbox_configs()
        .into_iter()
        .find(|config| config.metadata.uid == "u2")
        .and_then(|config| config.user_namespace);
    assert_eq!(node_mode, Some(UserNamespace::Node));
    assert!(!h.updates.iter().any(
        |u| matches!(u, PodUpdate::Event { event, .. } if event.reason == "FailedCreatePodSandBox")
    ));
}

fn recursive_read_only_pod() -> k8s_openapi::api::core::v1::Pod {
    pod(
        "Always",
        json!({"containers": [{"name": "app", "image": IMAGE, "volumeMounts": [
            {"name": "data", "mountPath": "/data", "readOnly": true, "recursiveReadOnly": "Enabled"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}]}),
    )
}

#[tokio::test(start_paused = true)]
async fn a_recursive_read_only_mount_is_refused_where_the_handler_cannot() {
    let root = tempfile::tempdir().unwrap();
    let mut h = harness(
        fresh_runtime(),
        root.path(),
        view(vec![default_handler(false)]),
    );
    h.apply(&recursive_read_only_pod());
    let status = h
        .status_where("CreateContainerConfigError", |s| {
            waiting_reason(s) == "CreateContainerConfigError"
        })
        .await;
    assert_eq!(
        waiting_message(&status),
        "failed to resolve recursive read-only mode: volume \"data\" requested recursive read-only mode, but it is not supported by the runtime"
    );
    assert!(
        h.runtime
            .calls()
            .iter()
            .all(|call| !call.starts_with("CreateContainer"))
    );
}
