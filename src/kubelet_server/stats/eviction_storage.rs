//! The pods' storage figures of the full summary handed to the eviction manager: every
//! housekeeping interval the summary is measured and each pod's writable layers, logs,
//! volumes and ephemeral storage published for its local-storage limits.

use std::{collections::BTreeMap, sync::Weak, time::Duration};

use nodepulse_actors::{
    eviction::PodStorageCache,
    ports::{ContainerStorage, PodStorage},
};

use super::{Scope, collect, summary::PodStats};
use crate::kubelet_server::ApiState;

/// What the eviction manager needs of one pod's summary.
pub fn pod_storage(pod: &PodStats) -> PodStorage {
    PodStorage {
        containers: (pod.containers.iter())
            .map(|container| ContainerStorage {
                name: container.name.clone(),
                rootfs_bytes: container.rootfs.as_ref().and_then(|fs| fs.used_bytes),
                logs_bytes: container.logs.as_ref().and_then(|fs| fs.used_bytes),
            })
            .collect(),
        volumes: (pod.volume_stats.iter())
            .filter_map(|volume| Some((volume.name.clone(), volume.fs.used_bytes?)))
            .collect(),
        ephemeral_bytes: pod.ephemeral_storage.as_ref().and_then(|fs| fs.used_bytes),
    }
}

/// Measures and publishes every `period` until the API's state is gone; a failed
/// measurement keeps the last figures (the kubelet skips its pass then).
pub async fn refresh(state: Weak<ApiState>, cache: PodStorageCache, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(state) = state.upgrade() else { return };
        match collect(&state, Scope::Full).await {
            Ok(summary) => cache.publish(
                (summary.pods.iter())
                    .map(|pod| (pod.pod_ref.uid.clone(), pod_storage(pod)))
                    .collect::<BTreeMap<_, _>>(),
            ),
            Err(error) => tracing::debug!(%error, "no storage figures for the eviction manager"),
        }
    }
}
