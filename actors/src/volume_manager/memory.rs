//! What the volume manager keeps across restarts of its actor (in a `Kept`, as the other
//! actors do): the pods the watch reported, the actual state, the tokens issued, the failed
//! operations with their back-off, and `volumesAttached`. The [`VolumeView`] handed to the pod
//! providers reads the same memory, so a restart never blinds them.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::Kept;
use tokio::time::Instant;

use super::{
    ActualState, DesiredPod, DesiredState, MountReadiness, Plugin, PodDirs, PodVolume,
    UniqueVolumeName,
    content::{NodeAllocatable, token::TokenCache},
    mount_readiness,
    spec::ResolvedClaims,
};
use crate::{
    kept_pod::KeptPod,
    ports::CsiVolume,
    shrink::{btree_map_after_removal, btree_set_after_removal},
    volume_manager::PodVolumeView,
};

/// First wait after a failed operation; it doubles up to [`MAX_BACKOFF`] (§1.3).
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(122);

/// A failed operation on one (pod, volume): when it may run again, and why it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub error: String,
    pub retry_at: Instant,
    pub backoff: Duration,
    pub failures: u32,
}

impl Failure {
    /// The failure after `previous` (doubling its wait), at `now`.
    pub fn next(previous: Option<&Failure>, error: String, now: Instant) -> Self {
        let backoff = previous.map_or(INITIAL_BACKOFF, |p| (p.backoff * 2).min(MAX_BACKOFF));
        Self {
            error,
            retry_at: now + backoff,
            backoff,
            failures: previous.map_or(1, |p| p.failures + 1),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct VolumeManagerMemory {
    /// The pods the watch reported, by UID: the watch's `Arc`s, shared with the provider.
    pub pods: BTreeMap<String, KeptPod>,
    /// The pods (by UID) that declare a `persistentVolumeClaim` volume: the only ones whose
    /// claims each pass looks at, so the others are not decoded for it.
    pub claim_pods: BTreeSet<String>,
    /// The watch has delivered a complete list since this process started.
    pub listed: bool,
    pub actual: ActualState,
    /// The actual state was rebuilt from disk (once per process; instances merge with it).
    pub reconstructed: bool,
    /// The reconciler has run a pass since the process started (the kubelet's
    /// `ReconcilerStatesHasBeenSynced`).
    pub synced: bool,
    pub volumes_attached: BTreeSet<UniqueVolumeName>,
    pub allocatable: NodeAllocatable,
    pub tokens: TokenCache,
    /// By (pod UID, outer volume name).
    pub failures: BTreeMap<(String, String), Failure>,
    /// Pods told (a FailedMount event) that some of their volumes cannot be served.
    pub pod_errors_reported: BTreeSet<String>,
    /// Pod UIDs whose directory could not be removed, with why.
    pub pod_dir_failures: BTreeMap<String, String>,
    /// The pods' claim volumes resolved to CSI volumes (or why not), by (pod UID, volume).
    pub claims: ResolvedClaims,
    /// When a failed claim is resolved again, by (pod UID, volume).
    pub claim_retry_at: BTreeMap<(String, String), Instant>,
    /// The desired state last built, reused while its inputs are unchanged.
    pub desired_cache: DesiredCache,
}

/// The desired state last built and what it was built from. Each projected or configMap volume
/// is refreshed at its own time, so with 100 pods the reconciler passes a few times a second
/// with nothing changed; rebuilding every pod's volumes each time (cloning their sources) took
/// a third of the agent's steady CPU with 100 real pods. A changed pod is a new `Arc` from the
/// watch, so comparing the `KeptPod`s tells whether anything did.
#[derive(Debug, Default, Clone)]
pub struct DesiredCache {
    built_from: Option<DesiredInputs>,
    desired: Arc<DesiredState>,
}

#[derive(Debug, Clone)]
struct DesiredInputs {
    node_name: String,
    listed: bool,
    /// In UID order. Held, not only compared by address: a freed pod's address could be
    /// another's later.
    pods: Vec<KeptPod>,
    claims: ResolvedClaims,
}

impl DesiredInputs {
    fn of(memory: &VolumeManagerMemory, node_name: &str) -> Self {
        Self {
            node_name: node_name.to_owned(),
            listed: memory.listed,
            pods: memory.pods.values().cloned().collect(),
            claims: memory.claims.clone(),
        }
    }

    fn are_those_of(&self, memory: &VolumeManagerMemory, node_name: &str) -> bool {
        self.listed == memory.listed
            && self.node_name == node_name
            && self.pods.len() == memory.pods.len()
            && (self.pods.iter().zip(memory.pods.values())).all(|(built, now)| built.ptr_eq(now))
            && self.claims == memory.claims
    }

    /// The pod `uid` as this state was built from.
    fn pod(&self, uid: &str) -> Option<&KeptPod> {
        let found = (self.pods).binary_search_by(|pod| pod.uid().cmp(&Some(uid)));
        found.ok().map(|index| &self.pods[index])
    }
}

impl VolumeManagerMemory {
    /// Forgets a pod the watch reported deleted, and its failed operations. Its volumes stay
    /// in the actual state until they are torn down.
    pub fn forget_pod(&mut self, uid: &str) {
        self.pods.remove(uid);
        btree_map_after_removal(&mut self.pods);
        self.claim_pods.remove(uid);
        btree_set_after_removal(&mut self.claim_pods);
        self.failures.retain(|(pod_uid, _), _| pod_uid != uid);
        btree_map_after_removal(&mut self.failures);
    }

    /// The desired state from the pods the watch reported. Complete (so unmounting may begin)
    /// only once the watch has listed every pod. Built again only when a pod, a claim or the
    /// listing changed since the last call, and then only for the pods that changed.
    pub fn desired(&mut self, node_name: &str) -> Arc<DesiredState> {
        let cache = &self.desired_cache;
        let unchanged =
            (cache.built_from.as_ref()).is_some_and(|inputs| inputs.are_those_of(self, node_name));
        if !unchanged {
            let desired = self.desired_reusing_unchanged_pods(node_name);
            self.desired_cache = DesiredCache {
                built_from: Some(DesiredInputs::of(self, node_name)),
                desired: Arc::new(desired),
            };
        }
        Arc::clone(&self.desired_cache.desired)
    }

    /// The desired state, with every pod's entry taken over from the last one where the pod is
    /// the same version and the node and claims are the same: in a burst of pod starts each pod
    /// changes a few times, and building every pod's volumes again for each change made the
    /// burst's reconciler passes quadratic.
    fn desired_reusing_unchanged_pods(&self, node_name: &str) -> DesiredState {
        let reusable = self.reusable(node_name);
        let pods = (self.pods.iter())
            .filter_map(|(uid, pod)| {
                let entry = self.desired_entry(reusable, node_name, uid, pod)?;
                Some((uid.clone(), entry))
            })
            .collect();
        DesiredState {
            pods,
            populated: self.listed,
        }
    }

    /// [`Self::desired`] for one pod only: what the per-operation checks ask, without building
    /// every pod's volumes to look at one (nor decoding a settled pod to answer).
    pub fn desired_pod(&self, node_name: &str, pod_uid: &str) -> DesiredState {
        let entry = (self.pods.get(pod_uid))
            .and_then(|pod| self.desired_entry(self.reusable(node_name), node_name, pod_uid, pod));
        DesiredState {
            pods: entry
                .map(|entry| (pod_uid.to_owned(), entry))
                .into_iter()
                .collect(),
            populated: self.listed,
        }
    }

    /// What the last desired state was built from, if its entries hold for `node_name` and
    /// the claims resolved now.
    fn reusable(&self, node_name: &str) -> Option<&DesiredInputs> {
        (self.desired_cache.built_from.as_ref())
            .filter(|inputs| inputs.node_name == node_name && inputs.claims == self.claims)
    }

    /// Pod `uid`'s entry (none if it needs no volumes here): the last desired state's when it
    /// was built from this version of the pod, else built from it.
    fn desired_entry(
        &self,
        reusable: Option<&DesiredInputs>,
        node_name: &str,
        uid: &str,
        pod: &KeptPod,
    ) -> Option<Arc<DesiredPod>> {
        match reusable.and_then(|inputs| inputs.pod(uid)) {
            Some(built) if built.ptr_eq(pod) => self.desired_cache.desired.pods.get(uid).cloned(),
            _ => DesiredPod::of(pod, node_name, &self.claims).map(Arc::new),
        }
    }
}

/// What the pod providers read ([`PodVolumeView`]): the verdict for a pod, computed from the
/// volume manager's memory when asked.
#[derive(Clone)]
pub struct VolumeView {
    memory: Kept<VolumeManagerMemory>,
    node_name: String,
    dirs: PodDirs,
}

impl VolumeView {
    pub fn new(memory: Kept<VolumeManagerMemory>, node_name: String, dirs: PodDirs) -> Self {
        Self {
            memory,
            node_name,
            dirs,
        }
    }

    /// The pod `pod_uid` as the watch last reported it.
    pub fn pod(&self, pod_uid: &str) -> Option<Arc<Pod>> {
        self.memory
            .read(|memory| memory.pods.get(pod_uid).map(KeptPod::pod))
    }

    /// Every pod the watch reported (bound to this node), in UID order: the kubelet's pod
    /// manager view.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.memory
            .read(|memory| memory.pods.values().map(KeptPod::pod).collect())
    }

    /// The kubelet's `volume_manager_total_volumes`: the pods' volumes mounted
    /// (`actual_state_of_world`) and wanted (`desired_state_of_world`), by the plugin's
    /// qualified name (`kubernetes.io/csi:<driver>` for a CSI volume).
    pub fn total_volumes(&self) -> BTreeMap<(&'static str, String), u64> {
        let qualified = |plugin: Plugin, csi: Option<&Arc<CsiVolume>>| match csi {
            Some(csi) if plugin == Plugin::Csi => format!("{}:{}", plugin.name(), csi.driver),
            _ => plugin.name().to_owned(),
        };
        let mut totals = BTreeMap::new();
        self.memory.read(|memory| {
            for mounted in memory.actual.mounts.values() {
                let plugin = qualified(mounted.plugin, mounted.csi.as_ref());
                *totals.entry(("actual_state_of_world", plugin)).or_insert(0) += 1;
            }
            for uid in memory.pods.keys() {
                let desired = memory.desired_pod(&self.node_name, uid);
                let volumes = desired.pods.values().flat_map(|pod| pod.volumes.values());
                for volume in volumes {
                    let plugin = qualified(volume.plugin, volume.csi.as_ref());
                    *totals
                        .entry(("desired_state_of_world", plugin))
                        .or_insert(0) += 1;
                }
            }
        });
        totals
    }
}

impl PodVolumeView for VolumeView {
    fn readiness(&self, pod_uid: &str) -> MountReadiness {
        self.memory.read(|memory| {
            // The one pod's desired state: providers ask for every pending pod on each tick.
            let desired = memory.desired_pod(&self.node_name, pod_uid);
            mount_readiness(&desired, &memory.actual, &memory.volumes_attached, pod_uid)
        })
    }

    fn host_paths(&self, pod_uid: &str) -> BTreeMap<String, PathBuf> {
        self.memory.read(|memory| {
            let desired = memory.desired_pod(&self.node_name, pod_uid);
            let Some(pod) = desired.pods.get(pod_uid) else {
                return BTreeMap::new();
            };
            pod.volumes
                .values()
                .filter(|volume| {
                    volume.plugin.has_host_path()
                        && memory
                            .actual
                            .mounts
                            .contains_key(&(pod_uid.to_owned(), volume.name.clone()))
                })
                .map(|volume| {
                    let spec = volume.spec.volume();
                    let path = match (&volume.plugin, &spec.host_path) {
                        (Plugin::HostPath, Some(source)) => PathBuf::from(&source.path),
                        // A claim's directory is named after its PV, as the kubelet's.
                        (Plugin::Csi, _) => self
                            .dirs
                            .volume_dir(pod_uid, volume.plugin, csi_dir_name(volume))
                            .join("mount"),
                        _ => self.dirs.volume_dir(pod_uid, volume.plugin, &volume.name),
                    };
                    (volume.name.clone(), path)
                })
                .collect()
        })
    }
}

/// The directory of a CSI volume under `kubernetes.io~csi/`: its PV's name.
fn csi_dir_name(volume: &PodVolume) -> &str {
    volume
        .csi
        .as_ref()
        .map_or(volume.name.as_str(), |csi| csi.pv_name.as_str())
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
