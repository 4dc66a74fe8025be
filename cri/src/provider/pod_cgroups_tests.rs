//! The engine's pod cgroups against the in-memory port, on paused time: made (QoS cgroups
//! first) before the sandbox, which gets it as its parent; a pod whose cgroup cannot be made
//! is not started; the cgroup of a pod gone and a stale one are removed, a running pod's kept.

use std::{sync::Arc, time::Duration};

use serde_json::json;

use super::{
    CriPods, PodCgroupsSetup,
    tests::{Harness, IMAGE, pod},
};
use nodepulse_actors::{
    pods::{
        PodLifecycleProvider,
        cgroups::{CgroupLayout, Qos, pod_config::PodCgroupSettings},
    },
    ports::{
        CgroupDriver, CgroupName, PodCgroups,
        fakes::{eventually, pod_cgroups::FakePodCgroups},
    },
};

const BUDGET: Duration = Duration::from_secs(600);

fn layout() -> CgroupLayout {
    CgroupLayout::new("/", CgroupDriver::Cgroupfs)
}

fn with_cgroups(cgroups: &Arc<FakePodCgroups>) -> impl FnOnce(CriPods) -> CriPods {
    let setup = PodCgroupsSetup {
        cgroups: Arc::clone(cgroups) as _,
        layout: layout(),
        settings: PodCgroupSettings::default(),
    };
    move |pods| pods.with_pod_cgroups(setup)
}

fn guaranteed() -> serde_json::Value {
    json!({"containers": [{"name": "app", "image": IMAGE,
        "resources": {"requests": {"cpu": "500m", "memory": "128Mi"},
                      "limits": {"cpu": "500m", "memory": "128Mi"}}}]})
}

#[tokio::test(start_paused = true)]
async fn the_pod_cgroup_is_made_after_the_qos_cgroups_and_parents_the_sandbox() {
    let cgroups = Arc::new(FakePodCgroups::default());
    let mut harness = Harness::configured(with_cgroups(&cgroups));
    harness.apply(&pod("Always", guaranteed()));
    harness
        .status_where("Running", |s| s["phase"] == "Running")
        .await;
    let name = layout().pod("u1", Qos::Guaranteed).unwrap();
    let config = cgroups.config(&name).expect("the pod cgroup");
    assert_eq!(
        (config.cpu_shares, config.cpu_quota, config.memory),
        (Some(512), Some(50_000), Some(128 << 20))
    );
    let calls = cgroups.calls();
    let qos = calls.iter().position(|c| c == "ensure /kubepods/burstable");
    let own = calls.iter().position(|c| c == "ensure /kubepods/podu1");
    assert!(qos.is_some() && qos < own, "{calls:?}");
    let parents: Vec<String> = harness
        .runtime
        .sandbox_configs()
        .into_iter()
        .map(|c| c.cgroup_parent)
        .collect();
    assert_eq!(parents, ["/kubepods/podu1"]);
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_cgroup_cannot_be_made_is_not_started() {
    let cgroups = Arc::new(FakePodCgroups::default());
    cgroups.refuse(layout().pod("u1", Qos::BestEffort).unwrap());
    let mut harness = Harness::configured(with_cgroups(&cgroups));
    harness.apply(&pod("Always", json!({})));
    let started = tokio::time::Instant::now();
    loop {
        harness.terminated();
        if harness
            .events()
            .iter()
            .any(|e| e.starts_with("Warning FailedCreatePodContainer: unable to ensure pod container exists: failed to create cgroup /kubepods/besteffort/podu1"))
        {
            break;
        }
        assert!(
            started.elapsed() < BUDGET,
            "no FailedCreatePodContainer: {:?}",
            harness.events()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let calls = harness.runtime.calls();
    assert!(
        !calls.iter().any(|c| c.starts_with("RunPodSandbox")),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn cgroups_of_pods_gone_and_stale_ones_are_removed_and_a_running_pods_kept() {
    let cgroups = Arc::new(FakePodCgroups::default());
    let stale = layout().pod("old", Qos::Burstable).unwrap();
    cgroups.insert(stale.clone());
    let mut harness = Harness::configured(with_cgroups(&cgroups));
    let running = pod("Always", json!({}));
    harness.apply(&running);
    harness
        .status_where("Running", |s| s["phase"] == "Running")
        .await;
    assert!(
        cgroups.exists(&stale),
        "nothing is removed before the pod list is complete"
    );
    harness.pods.pods_listed();
    let mine = layout().pod("u1", Qos::BestEffort).unwrap();
    eventually("the stale cgroup is removed", BUDGET, || {
        !cgroups.exists(&stale)
    })
    .await;
    assert!(cgroups.exists(&mine), "the running pod keeps its cgroup");
    harness.pods.pod_deleted(&running);
    eventually("the deleted pod's cgroup is removed", BUDGET, || {
        !cgroups.exists(&mine)
    })
    .await;
    let _: &CgroupName = &mine;
}
