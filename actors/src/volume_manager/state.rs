//! The desired state of the world (the volumes the pods bound here need) and the actual state
//! of the world (what is set up on disk), keyed by pod UID and outer volume name (§1.1, §1.4).
//! Pure data: the actor keeps them, the populator fills the first and operations the second.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use tokio::time::Instant;

use k8s_openapi::api::core::v1::Pod;

use super::{
    layout::UniqueVolumeName,
    plugin::Plugin,
    spec::{PodVolume, ResolvedClaims, SpecError, pod_volumes_with},
};
use crate::{
    kept_pod::KeptPod,
    ports::CsiVolume,
    shrink::{btree_map_after_removal, btree_set_after_removal},
};

/// One pod the node must serve volumes to.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredPod {
    pub namespace: String,
    pub name: String,
    /// By outer volume name.
    pub volumes: PodVolumeMap,
    /// Volumes that cannot enter the desired state; they keep the pod from starting.
    pub errors: Vec<SpecError>,
    /// Claim volumes whose claim is not resolved yet: the pod waits for them.
    pub unresolved: Vec<String>,
}

impl DesiredPod {
    /// What `pod` needs, if it is bound to `node_name`, not terminated and has a UID.
    pub fn of(kept: &KeptPod, node_name: &str, claims: &ResolvedClaims) -> Option<Self> {
        let pod = kept.pod();
        if !is_bound_to(&pod, node_name) || is_terminated(&pod) || pod.metadata.uid.is_none() {
            return None;
        }
        let found = pod_volumes_with(kept, claims);
        Some(Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            volumes: found.volumes.into_iter().collect(),
            errors: found.errors,
            unresolved: found.unresolved,
        })
    }
}

/// A pod's volumes by outer name: a sorted `Vec`, as a pod has a few. The desired state keeps
/// one for every pod, and a `BTreeMap` node reserves room for eleven volumes (about 3 KiB a pod).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumeMap(Vec<PodVolume>);

impl PodVolumeMap {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0
            .binary_search_by(|volume| volume.name.as_str().cmp(name))
    }

    pub fn get(&self, name: &str) -> Option<&PodVolume> {
        self.position(name).ok().map(|index| &self.0[index])
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut PodVolume> {
        self.position(name).ok().map(|index| &mut self.0[index])
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// The outer names, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|volume| &volume.name)
    }

    pub fn values(&self) -> std::slice::Iter<'_, PodVolume> {
        self.0.iter()
    }

    /// (outer name, volume), sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &PodVolume)> {
        self.0.iter().map(|volume| (&volume.name, volume))
    }
}

/// Sorted by name. The names are unique: a pod's volumes are found by the set of names its
/// containers mount.
impl FromIterator<PodVolume> for PodVolumeMap {
    fn from_iter<I: IntoIterator<Item = PodVolume>>(volumes: I) -> Self {
        let mut volumes: Vec<PodVolume> = volumes.into_iter().collect();
        volumes.sort_by(|a, b| a.name.cmp(&b.name));
        debug_assert!(
            volumes.windows(2).all(|pair| pair[0].name != pair[1].name),
            "one volume a name"
        );
        volumes.shrink_to_fit();
        Self(volumes)
    }
}

impl std::ops::Index<&str> for PodVolumeMap {
    type Output = PodVolume;

    fn index(&self, name: &str) -> &PodVolume {
        self.get(name)
            .unwrap_or_else(|| panic!("no volume {name:?}"))
    }
}

impl<'a> IntoIterator for &'a PodVolumeMap {
    type Item = (&'a String, &'a PodVolume);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, PodVolume>,
        fn(&'a PodVolume) -> (&'a String, &'a PodVolume),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|volume| (&volume.name, volume))
    }
}

/// The volumes the pods bound to this node need, by pod UID.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    /// Shared: a state built again takes over the entries of the pods that did not change.
    pub pods: BTreeMap<String, Arc<DesiredPod>>,
    /// Whether it was built from a complete pod list (the kubelet's `hasAddedPods`). Until then
    /// nothing is unmounted: a volume reconstructed after a restart may belong to a pod not yet
    /// seen.
    pub populated: bool,
}

impl DesiredState {
    /// The desired state from the complete list of pods the node knows: those bound to
    /// `node_name` and not terminated.
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>, node_name: &str) -> Self {
        let pods: Vec<KeptPod> = pods.into_iter().cloned().map(KeptPod::from).collect();
        Self::from_pods_with(&pods, node_name, &ResolvedClaims::new())
    }

    /// [`DesiredState::from_pods`] with the claims resolved so far.
    pub fn from_pods_with<'a>(
        pods: impl IntoIterator<Item = &'a KeptPod>,
        node_name: &str,
        claims: &ResolvedClaims,
    ) -> Self {
        let pods = pods
            .into_iter()
            .filter_map(|pod| {
                let desired = DesiredPod::of(pod, node_name, claims)?;
                Some((pod.uid()?.to_owned(), Arc::new(desired)))
            })
            .collect();
        Self {
            pods,
            populated: true,
        }
    }

    /// Whether `pod_uid` still needs its volume `volume`.
    pub fn wants(&self, pod_uid: &str, volume: &str) -> bool {
        self.pods
            .get(pod_uid)
            .is_some_and(|pod| pod.volumes.contains_key(volume))
    }

    /// Whether some pod needs the volume named `unique_name` (a CSI volume stays staged then).
    pub fn wants_unique(&self, unique_name: &UniqueVolumeName) -> bool {
        self.pods
            .values()
            .flat_map(|pod| pod.volumes.values())
            .any(|volume| &volume.unique_name == unique_name)
    }
}

fn is_bound_to(pod: &Pod, node_name: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name)
}

/// Whether `pod` declares a `persistentVolumeClaim` volume (whose claim the actor resolves).
pub fn declares_claims(pod: &Pod) -> bool {
    (pod.spec.iter())
        .flat_map(|spec| spec.volumes.iter().flatten())
        .any(|volume| volume.persistent_volume_claim.is_some())
}

/// A pod in phase Succeeded or Failed has stopped all its containers; the kubelet unmounts its
/// volumes then, deleted or not (§1.2).
pub fn is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether a volume is known to be set up, or may be (found on disk after a restart without
/// proof that SetUp finished).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountState {
    Mounted,
    Uncertain,
}

/// One volume set up for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedVolume {
    pub plugin: Plugin,
    pub unique_name: UniqueVolumeName,
    pub attachable: bool,
    pub state: MountState,
    /// When SetUp last wrote the content; `None` after reconstruction, so the first pass
    /// refreshes it as the kubelet's populator does on re-adding the pod.
    pub set_up_at: Option<Instant>,
    /// The CSI volume published, for its TearDown and UnmountDevice; shared with the desired
    /// state's `PodVolume` (inline, about 200 bytes a mount, though most volumes are not CSI).
    pub csi: Option<Arc<CsiVolume>>,
}

/// A CSI volume staged for the whole node (MountDevice done, or found staged on disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedDevice {
    pub csi: CsiVolume,
    /// Listed in `volumesInUse` until unstaged. A device read back from disk counts as
    /// attachable: the disk does not say, and a detach under a staged device is worse.
    pub attachable: bool,
    /// `Uncertain` when read back from disk: MountDevice (idempotent) runs again before a
    /// pod's SetUp relies on it, as the kubelet's uncertain device mounts.
    pub state: MountState,
}

/// What is set up on disk: the pod mounts, the CSI volumes staged for the node, and every pod
/// directory under `<root>/pods`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActualState {
    /// By (pod UID, outer volume name).
    pub mounts: BTreeMap<(String, String), MountedVolume>,
    /// CSI volumes staged on this node, by unique name.
    pub devices: BTreeMap<UniqueVolumeName, StagedDevice>,
    /// Pod UIDs with a directory on disk, with or without volumes.
    pub pod_dirs: BTreeSet<String>,
}

impl ActualState {
    /// Records a successful Mount or Remount of `volume` for `pod_uid` at `now`.
    pub fn mark_mounted(&mut self, pod_uid: &str, volume: &PodVolume, now: Instant) {
        self.pod_dirs.insert(pod_uid.to_owned());
        self.mounts.insert(
            (pod_uid.to_owned(), volume.name.clone()),
            MountedVolume {
                plugin: volume.plugin,
                unique_name: volume.unique_name.clone(),
                attachable: volume.attachable,
                state: MountState::Mounted,
                set_up_at: Some(now),
                csi: volume.csi.clone(),
            },
        );
    }

    /// Records a successful Unmount.
    pub fn mark_unmounted(&mut self, pod_uid: &str, volume: &str) {
        self.mounts.remove(&(pod_uid.to_owned(), volume.to_owned()));
        btree_map_after_removal(&mut self.mounts);
    }

    /// Records that the pod's directory is gone.
    pub fn mark_pod_dir_removed(&mut self, pod_uid: &str) {
        self.pod_dirs.remove(pod_uid);
        btree_set_after_removal(&mut self.pod_dirs);
    }

    /// Records that a CSI volume is unstaged.
    pub fn mark_unstaged(&mut self, unique_name: &UniqueVolumeName) {
        self.devices.remove(unique_name);
        btree_map_after_removal(&mut self.devices);
    }

    /// Whether any volume of `pod_uid` is (possibly) still set up.
    pub fn pod_has_mounts(&self, pod_uid: &str) -> bool {
        self.mounts.keys().any(|(uid, _)| uid == pod_uid)
    }

    /// Takes over CSI mounts read back from disk, which are keyed by their directory (the PV's
    /// name) rather than the pod's outer volume name: a duplicate of a mount this process
    /// already knows is dropped; one a desired pod's claim names is moved to that volume's key
    /// (still uncertain, so its idempotent SetUp runs again).
    pub fn adopt_csi(&mut self, desired: &DesiredState) {
        let by_dir: Vec<(String, String)> = self
            .mounts
            .iter()
            .filter(|((_, name), m)| m.csi.as_ref().is_some_and(|csi| &csi.pv_name == name))
            .map(|(key, _)| key.clone())
            .collect();
        for (uid, pv) in by_dir {
            let known = self.mounts.iter().any(|((other_uid, name), m)| {
                other_uid == &uid && name != &pv && m.csi.as_ref().is_some_and(|c| c.pv_name == pv)
            });
            let wanted = desired.pods.get(&uid).and_then(|pod| {
                pod.volumes
                    .values()
                    .find(|v| v.csi.as_ref().is_some_and(|c| c.pv_name == pv))
            });
            if known {
                self.mounts.remove(&(uid, pv));
            } else if let Some(volume) = wanted.filter(|v| v.name != pv) {
                let mut mounted = self.mounts.remove(&(uid.clone(), pv)).expect("listed");
                mounted.attachable = volume.attachable;
                mounted.unique_name = volume.unique_name.clone();
                self.mounts.insert((uid, volume.name.clone()), mounted);
            }
        }
    }

    /// Whether `unique_name` is staged for certain (an uncertain one is staged again).
    pub fn staged(&self, unique_name: &UniqueVolumeName) -> bool {
        self.devices
            .get(unique_name)
            .is_some_and(|device| device.state == MountState::Mounted)
    }

    /// Whether any pod has `unique_name` set up.
    pub fn any_uses(&self, unique_name: &UniqueVolumeName) -> bool {
        self.mounts.values().any(|m| &m.unique_name == unique_name)
    }

    /// Whether a pod other than `except` (pod UID, volume) has `unique_name` set up.
    pub fn others_use(&self, unique_name: &UniqueVolumeName, except: &(String, String)) -> bool {
        self.mounts
            .iter()
            .any(|(key, mounted)| key != except && &mounted.unique_name == unique_name)
    }
}
