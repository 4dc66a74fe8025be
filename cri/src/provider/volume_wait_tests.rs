//! The CRI provider waits for the volume manager as the kubelet's WaitForAttachAndMount: no
//! sandbox and no container until every volume of the pod is set up, then the containers start
//! with the mounts the volume manager reports.

use std::{path::PathBuf, sync::Arc, time::Duration};

use serde_json::json;

use super::tests::{Harness, IMAGE, phase, pod};
use nodepulse_actors::{pods::PodLifecycleProvider, volume_manager::ports::fakes::view::OneVolume};

#[tokio::test(start_paused = true)]
async fn nothing_is_made_or_started_until_the_pods_volumes_are_set_up() {
    let volumes = Arc::new(OneVolume::default());
    let mut harness = Harness::with_volume_view(Arc::clone(&volumes) as _);
    harness.apply(&pod(
        "Always",
        json!({
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "app", "image": IMAGE,
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        }),
    ));
    // Several retries' worth of syncs while the volume is not set up.
    for _ in 0..30 {
        let now = nodepulse_actors::clock::system()();
        harness.updates.extend(harness.pods.tick(now));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        harness.runtime.sandbox_configs().is_empty(),
        "no sandbox before the volumes"
    );
    assert!(
        harness.runtime.created("app").is_empty(),
        "no container before the volumes"
    );

    volumes.set_up();
    let now = nodepulse_actors::clock::system()();
    harness
        .updates
        .extend(harness.pods.volumes_changed("u1", now));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let created = harness.runtime.created("app");
    let mounts: Vec<_> = created[0]
        .mounts
        .iter()
        .map(|m| (m.container_path.clone(), m.host_path.clone()))
        .collect();
    assert!(
        mounts.contains(&(PathBuf::from("/data"), PathBuf::from("/var/lib/np/u1/data"))),
        "{mounts:?}"
    );
}
