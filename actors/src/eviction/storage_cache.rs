//! The pods' local storage as last measured, beside the pods the provider runs: the kubelet's
//! eviction reads its summary's storage figures, so the daemon's summary publishes them here
//! once a housekeeping interval and the eviction pass reads them without I/O.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use crate::ports::{PodStats, PodStatsSource, PodStorage};

/// Each pod's storage by UID, as the last measurement left it.
#[derive(Debug, Clone, Default)]
pub struct PodStorageCache(Arc<Mutex<BTreeMap<String, PodStorage>>>);

impl PodStorageCache {
    /// Replaces every figure: a pod the measurement no longer saw has none.
    pub fn publish(&self, measured: BTreeMap<String, PodStorage>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = measured;
    }

    pub fn of(&self, uid: &str) -> Option<PodStorage> {
        (self.0.lock().unwrap_or_else(PoisonError::into_inner))
            .get(uid)
            .cloned()
    }
}

/// `pods` with their measured storage.
pub struct WithStorage {
    pub pods: Arc<dyn PodStatsSource>,
    pub storage: PodStorageCache,
}

impl PodStatsSource for WithStorage {
    fn active_pods(&self) -> Vec<PodStats> {
        let mut pods = self.pods.active_pods();
        for stats in &mut pods {
            if stats.storage.is_none() {
                let uid = stats.pod.metadata.uid.as_deref().unwrap_or_default();
                stats.storage = self.storage.of(uid);
            }
        }
        pods
    }
}
