//! Pod and QoS cgroups on real containers (`cgroupsPerQOS`, a cgroup root of the test's own):
//! a Guaranteed pod's memory limit and CFS quota on its pod cgroup under `kubepods`, its
//! container inside it, and the cgroup gone once the pod is deleted; a BestEffort pod under
//! `besteffort`; `kubepods` capped at capacity minus `systemReserved`; a stale pod cgroup
//! (with a process in it) killed and removed when a node starts over it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::DeleteParams};
use nodepulse_actors::quantity::value;
use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    eventually, eventually_async,
    test_cgroups::{cgroup_dirs, cgroup_root_for, make_root},
};
use serde_json::json;

use crate::cri_pods::{NAMESPACE, UNTIL_TERM, create_pod, shell, spec, wait_phase};

/// The directory of `cgroup` in the hierarchy that has `file` (v1), or the one v2 directory.
fn cgroup_file(cgroup: &str, file: &str) -> PathBuf {
    let dirs = cgroup_dirs(cgroup);
    dirs.iter()
        .find(|dir| dir.join(file).exists())
        .cloned()
        .unwrap_or_else(|| dirs[0].clone())
        .join(file)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn unified() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// The memory limit of `cgroup`, in bytes (`max`: none).
fn memory_limit(cgroup: &str) -> Option<u64> {
    let file = if unified() {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    };
    read(&cgroup_file(cgroup, file)).parse().ok()
}

/// The CFS quota and period of `cgroup`, in µs (quota `None`: none).
fn cpu_quota(cgroup: &str) -> (Option<i64>, u64) {
    if unified() {
        let max = read(&cgroup_file(cgroup, "cpu.max"));
        let (quota, period) = max.split_once(' ').expect("quota period");
        (quota.parse().ok(), period.parse().expect("period"))
    } else {
        let quota: i64 = read(&cgroup_file(cgroup, "cpu.cfs_quota_us"))
            .parse()
            .expect("quota");
        let period = read(&cgroup_file(cgroup, "cpu.cfs_period_us"))
            .parse()
            .expect("period");
        ((quota > 0).then_some(quota), period)
    }
}

fn exists(cgroup: &str) -> bool {
    cgroup_dirs(cgroup).iter().any(|dir| dir.is_dir())
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().expect("a uid")
}

async fn start(
    test: &str,
    prefix: &str,
    extra: &'static str,
) -> Option<(CriNode, CriFixture, TestCluster)> {
    CriFixture::required(test)?;
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start(prefix).await;
    let node =
        CriNode::start_with(&cluster.kubeconfig, &fixture, prefix, |_| extra.to_owned()).await;
    Some((node, fixture, cluster))
}

#[actix_rt::test]
async fn a_guaranteed_pod_has_its_limits_on_its_pod_cgroup_which_goes_with_the_pod() {
    let Some((node, fixture, cluster)) = start(
        "a_guaranteed_pod_has_its_limits_on_its_pod_cgroup_which_goes_with_the_pod",
        "cg-guaranteed",
        "",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-sized", node.name);
        let mut container = shell("app", UNTIL_TERM);
        container["resources"] = json!({"limits": {"cpu": "250m", "memory": "64Mi"}});
        let pod = create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([container])),
        )
        .await;
        wait_phase(&cluster, &name, "Running").await;
        let cgroup = format!("{}/kubepods/pod{}", node.cgroup_root(), uid(&pod));
        assert_eq!(memory_limit(&cgroup), Some(64 << 20), "{cgroup}");
        assert_eq!(cpu_quota(&cgroup), (Some(25_000), 100_000), "{cgroup}");
        // The container runs inside it: the runtime got it as the cgroup parent.
        let status = crate::cri_pods::app(&wait_phase(&cluster, &name, "Running").await);
        let id = crate::cri_pods::runtime_id(&status);
        assert!(
            exists(&format!("{cgroup}/{id}")),
            "the container's cgroup is in {cgroup}"
        );

        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        api.delete(&name, &DeleteParams::default())
            .await
            .expect("deleted");
        eventually(&format!("{cgroup} is removed"), || !exists(&cgroup)).await;
        let _ = &fixture;
    })
    .await;
}

#[actix_rt::test]
async fn a_best_effort_pod_runs_under_besteffort_and_kubepods_is_capped_at_allocatable() {
    let Some((node, _fixture, cluster)) = start(
        "a_best_effort_pod_runs_under_besteffort_and_kubepods_is_capped_at_allocatable",
        "cg-besteffort",
        "systemReserved:\n  memory: 256Mi\n",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-plain", node.name);
        let pod = create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        wait_phase(&cluster, &name, "Running").await;
        let root = node.cgroup_root();
        let cgroup = format!("{root}/kubepods/besteffort/pod{}", uid(&pod));
        assert!(exists(&cgroup), "{cgroup}");
        assert!(!exists(&format!("{root}/kubepods/pod{}", uid(&pod))));

        let nodes: Api<Node> = Api::all(cluster.client.clone());
        let reported = nodes.get(&node.name).await.expect("the Node");
        let capacity = reported.status.and_then(|s| s.capacity).expect("capacity");
        let memory = value(&capacity["memory"].0).expect("bytes");
        let expected = u64::try_from(memory - (256 << 20)).expect("positive");
        // The kernel keeps whole pages of a v1 limit.
        let page = if unified() { 1 } else { 4096 };
        assert_eq!(
            memory_limit(&format!("{root}/kubepods")),
            Some(expected / page * page)
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_stale_pod_cgroup_is_killed_and_removed_when_a_node_starts_over_it() {
    if CriFixture::required("a_stale_pod_cgroup_is_killed_and_removed_when_a_node_starts_over_it")
        .is_none()
    {
        return;
    }
    let stale_uid = "0a1b2c3d-0000-4000-8000-00000000dead";
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start("cg-stale").await;
    let stale = std::sync::Arc::new(std::sync::Mutex::new(None));
    let made = std::sync::Arc::clone(&stale);
    // What an earlier nodepulse left: a pod cgroup with a process still in it.
    let node = CriNode::start_with(&cluster.kubeconfig, &fixture, "cg-stale", move |dir| {
        let cgroup = format!(
            "{}/kubepods/besteffort/pod{stale_uid}",
            cgroup_root_for(dir)
        );
        make_root(&cgroup);
        let child = Command::new("sleep").arg("300").spawn().expect("sleep");
        for dir in cgroup_dirs(&cgroup) {
            std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).expect("joined");
        }
        *made.lock().expect("lock") = Some((cgroup, child));
        String::new()
    })
    .await;
    node.guard(async {
        let (cgroup, mut child) = stale.lock().expect("lock").take().expect("made");
        eventually(&format!("the stale {cgroup} is removed"), || {
            !exists(&cgroup)
        })
        .await;
        eventually_async("its process is killed", || {
            let done = child.try_wait().expect("waits").is_some();
            async move { done }
        })
        .await;
    })
    .await;
}
