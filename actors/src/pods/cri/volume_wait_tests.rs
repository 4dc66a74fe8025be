//! The CRI provider waits for the volume manager as the kubelet's WaitForAttachAndMount: no
//! sandbox and no container until every volume of the pod is set up, then the containers start
//! with the mounts the volume manager reports.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde_json::json;

use super::tests::{Harness, IMAGE, phase, pod};
use crate::{
    pods::provider::PodLifecycleProvider,
    volume_manager::{MountReadiness, PodVolumeView, UnmountedVolumes},
};

/// A volume manager whose one volume, `data`, is set up once `mounted` is set.
struct OneVolume {
    mounted: AtomicBool,
}

impl PodVolumeView for OneVolume {
    fn readiness(&self, _pod_uid: &str) -> MountReadiness {
        if self.mounted.load(Ordering::SeqCst) {
            MountReadiness::Ready
        } else {
            MountReadiness::Waiting(UnmountedVolumes {
                unmounted: vec!["data".to_owned()],
                ..UnmountedVolumes::default()
            })
        }
    }

    fn host_paths(&self, _pod_uid: &str) -> BTreeMap<String, PathBuf> {
        if self.mounted.load(Ordering::SeqCst) {
            [("data".to_owned(), PathBuf::from("/var/lib/np/u1/data"))].into()
        } else {
            BTreeMap::new()
        }
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_is_made_or_started_until_the_pods_volumes_are_set_up() {
    let volumes = Arc::new(OneVolume {
        mounted: AtomicBool::new(false),
    });
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
        let now = crate::clock::system()();
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

    volumes.mounted.store(true, Ordering::SeqCst);
    let now = crate::clock::system()();
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
