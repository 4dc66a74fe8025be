//! The CRI client's stats and image-removal calls against a real containerd, no API server:
//! a running container's ContainerStats and its sandbox's PodSandboxStats carry their IDs,
//! names and CPU and memory figures, the list calls filter by sandbox and ID, an unknown ID is
//! NotFound; RemoveImage removes an image (ImageStatus then has none) and is idempotent.

use nodepulse_testkit::{
    cri_fixture::{CriFixture, shell_container},
    eventually_async,
    oci_image::BUSYBOX_IMAGE,
};

use nodepulse_actors::ports::{
    ContainerFilter, ContainerRuntime, ContainerRuntimeError, ContainerStatsFilter, RuntimeStats,
    SandboxStatsFilter,
};

/// A shell that runs until SIGTERM, which ends it with 0.
const UNTIL_TERM: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

/// A cgroup parent of the test's own, as the kubelet gives each pod one: containerd reads a
/// sandbox's figures from it (without one PodSandboxStats fails: "cgroupPath is empty").
/// Dropped after the fixture's sandboxes are gone, it removes what runc left of it.
struct CgroupParent(String);

impl CgroupParent {
    fn new(test: &str) -> Self {
        Self(format!("/nodepulse-test-{test}-{}", std::process::id()))
    }
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
            return;
        };
        for hierarchy in hierarchies.flatten() {
            let dir = hierarchy.path().join(self.0.trim_start_matches('/'));
            // The sandbox's own cgroups first (runc removes them with the sandbox, as a rule).
            if let Ok(children) = std::fs::read_dir(&dir) {
                for child in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(child.path());
                }
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

#[tokio::test]
async fn a_running_container_and_its_sandbox_report_stats_by_id_and_filter() {
    let Some(()) =
        CriFixture::required("a_running_container_and_its_sandbox_report_stats_by_id_and_filter")
    else {
        return;
    };
    let cgroup = CgroupParent::new("stats");
    let fixture = CriFixture::start("cri-stats").await;
    let client = &fixture.client;
    let mut sandbox_config = fixture.sandbox_config("stats");
    sandbox_config.cgroup_parent = cgroup.0.clone();
    let sandbox = client
        .run_pod_sandbox(sandbox_config.clone(), String::new())
        .await
        .unwrap_or_else(|error| panic!("RunPodSandbox: {error}\n{}", fixture.containerd.log()));
    let mut config = shell_container("main", UNTIL_TERM, vec![]);
    config
        .labels
        .insert("nodepulse.test/container".to_owned(), "main".to_owned());
    let id = client
        .create_container(sandbox.clone(), config, sandbox_config.clone())
        .await
        .expect("CreateContainer");
    client
        .start_container(id.clone())
        .await
        .expect("StartContainer");

    // The first sample may come before the cgroup has anything to say.
    eventually_async("ContainerStats has CPU and memory figures", || {
        let call = client.container_stats(id.clone());
        async move {
            call.await.is_ok_and(|stats| {
                stats
                    .cpu
                    .is_some_and(|cpu| cpu.usage_core_nano_seconds.is_some())
                    && stats
                        .memory
                        .is_some_and(|memory| memory.working_set_bytes.is_some())
            })
        }
    })
    .await;
    let stats = client
        .container_stats(id.clone())
        .await
        .expect("ContainerStats");
    assert_eq!(
        (stats.id.as_str(), stats.name.as_str()),
        (id.as_str(), "main")
    );
    assert!(stats.cpu.expect("cpu").timestamp > 0);
    assert_eq!(
        stats
            .labels
            .get("nodepulse.test/container")
            .map(String::as_str),
        Some("main"),
        "the container's own labels"
    );

    let in_sandbox = client
        .list_container_stats(ContainerStatsFilter {
            sandbox_id: Some(sandbox.clone()),
            ..ContainerStatsFilter::default()
        })
        .await
        .expect("ListContainerStats by sandbox");
    assert_eq!(
        in_sandbox.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    let none = client
        .list_container_stats(ContainerStatsFilter {
            id: Some("no-such-container".to_owned()),
            ..ContainerStatsFilter::default()
        })
        .await
        .expect("ListContainerStats by an unknown ID");
    assert!(none.is_empty(), "{none:?}");
    match client.container_stats("no-such-container".to_owned()).await {
        Err(ContainerRuntimeError::NotFound { method, .. }) => assert_eq!(method, "ContainerStats"),
        other => panic!("ContainerStats of an unknown ID: {other:?}"),
    }

    let sandbox_stats = client
        .pod_sandbox_stats(sandbox.clone())
        .await
        .expect("PodSandboxStats");
    assert_eq!(sandbox_stats.id, sandbox);
    assert_eq!(sandbox_stats.metadata, sandbox_config.metadata);
    assert!(
        sandbox_stats.containers.iter().any(|c| c.id == id),
        "the sandbox's containers: {:?}",
        sandbox_stats.containers
    );
    assert!(
        sandbox_stats
            .memory
            .is_some_and(|m| m.working_set_bytes.is_some())
    );
    let listed = client
        .list_pod_sandbox_stats(SandboxStatsFilter {
            id: Some(sandbox.clone()),
            ..SandboxStatsFilter::default()
        })
        .await
        .expect("ListPodSandboxStats by ID");
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [sandbox.as_str()]
    );
    let labelled = client
        .list_pod_sandbox_stats(SandboxStatsFilter {
            labels: sandbox_config.labels.clone(),
            ..SandboxStatsFilter::default()
        })
        .await
        .expect("ListPodSandboxStats by labels");
    assert!(labelled.iter().any(|s| s.id == sandbox));
}

#[tokio::test]
async fn remove_image_removes_it_and_removing_it_again_is_no_error() {
    let Some(()) =
        CriFixture::required("remove_image_removes_it_and_removing_it_again_is_no_error")
    else {
        return;
    };
    let fixture = CriFixture::start("cri-remove-image").await;
    let client = &fixture.client;
    let image = client
        .image_status(BUSYBOX_IMAGE.to_owned())
        .await
        .expect("ImageStatus")
        .expect("the fixture imported the image");
    assert!(
        client
            .list_containers(ContainerFilter::default())
            .await
            .expect("ListContainers")
            .is_empty(),
        "no container uses it"
    );
    client
        .remove_image(image.id.clone())
        .await
        .expect("RemoveImage");
    assert_eq!(
        client
            .image_status(BUSYBOX_IMAGE.to_owned())
            .await
            .expect("ImageStatus"),
        None,
        "the image is gone"
    );
    client
        .remove_image(image.id)
        .await
        .expect("RemoveImage of an image already gone");
}
