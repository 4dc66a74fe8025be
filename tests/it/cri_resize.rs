//! In-place resize over CRI against a real containerd and runc: a running container's CPU and
//! memory, changed with UpdateContainerResources, show in its own cgroup files (read inside it,
//! as the upstream resize specs do) and in the resources ContainerStatus reports.

use std::time::Duration;

use nodepulse_actors::ports::{ContainerRuntime, LinuxResources};

use crate::cri_pods::{UNTIL_TERM, wait_container_trapped};
use nodepulse_testkit::{
    cri_fixture::{CriFixture, shell_container},
    eventually_async,
};

fn sized(milli_cpu: i64, memory: i64) -> LinuxResources {
    LinuxResources {
        cpu_period: 100_000,
        cpu_quota: milli_cpu * 100,
        cpu_shares: milli_cpu * 1024 / 1000,
        memory_limit_in_bytes: memory,
        oom_score_adj: 0,
    }
}

/// The container's cgroup v1 CFS quota, shares and memory limit, read inside it.
async fn cgroup_values(fixture: &CriFixture, id: &str) -> String {
    let script = "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.shares \
                  /sys/fs/cgroup/memory/memory.limit_in_bytes";
    let output = fixture
        .client
        .exec_sync(
            id.to_owned(),
            vec!["/bin/sh".into(), "-c".into(), script.into()],
            Duration::from_secs(10),
        )
        .await
        .expect("ExecSync");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn an_updated_container_shows_its_new_sizes_in_its_cgroup_and_its_status() {
    let test = "an_updated_container_shows_its_new_sizes_in_its_cgroup_and_its_status";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    let fixture = CriFixture::start("resize").await;
    let sandbox_config = fixture.sandbox_config("resized");
    let sandbox = fixture
        .client
        .run_pod_sandbox(sandbox_config.clone(), String::new())
        .await
        .expect("RunPodSandbox");
    let mut config = shell_container("app", UNTIL_TERM, Vec::new());
    config.resources = Some(sized(100, 100 << 20));
    let id = fixture
        .client
        .create_container(sandbox, config, sandbox_config)
        .await
        .expect("CreateContainer");
    fixture
        .client
        .start_container(id.clone())
        .await
        .expect("StartContainer");
    wait_container_trapped(&fixture, id.clone()).await;
    assert_eq!(cgroup_values(&fixture, &id).await, "10000 102 104857600");

    fixture
        .client
        .update_container_resources(id.clone(), sized(300, 200 << 20))
        .await
        .expect("UpdateContainerResources");
    eventually_async("the cgroup holds the new sizes", || {
        let values = cgroup_values(&fixture, &id);
        async move { values.await == "30000 307 209715200" }
    })
    .await;
    let status = fixture
        .client
        .container_status(id.clone())
        .await
        .expect("ContainerStatus");
    let applied = status
        .resources
        .expect("containerd reports what it applied");
    assert_eq!(
        (
            applied.cpu_quota,
            applied.cpu_shares,
            applied.memory_limit_in_bytes
        ),
        (30_000, 307, 200 << 20)
    );
}
