//! A pod's volumes as the volume manager sees them: the volumes its containers mount, each with
//! its plugin and unique name (§1.2). Volumes no container references are skipped, as the
//! kubelet's populator does. Pure: reads the `Pod` object and the claims the actor resolved.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::{claim::ClaimError, layout::UniqueVolumeName, plugin::Plugin};
use crate::{kept_pod::KeptPod, ports::CsiVolume, volume_manager::ResolvedClaim};

/// The pods' `persistentVolumeClaim` volumes the actor resolved (or failed to), by (pod UID,
/// outer volume name). A claim volume missing here is not resolved yet: the pod waits for it.
pub type ResolvedClaims = BTreeMap<(String, String), Result<ResolvedClaim, ClaimError>>;

/// One volume of one pod, ready for the desired state of the world.
#[derive(Debug, Clone, PartialEq)]
pub struct PodVolume {
    /// The outer name: the volume's name in the pod spec and its directory name on disk.
    pub name: String,
    pub plugin: Plugin,
    pub unique_name: UniqueVolumeName,
    /// Whether the attach/detach controller must attach it first (reported in `volumesInUse`).
    pub attachable: bool,
    /// The spec, for the plugin's SetUp.
    pub spec: VolumeSpec,
    /// The CSI volume behind a resolved claim (for [`Plugin::Csi`] only); behind an `Arc`, so a
    /// pod volume that is not CSI keeps 8 bytes for it, not 200, and a mount shares it.
    pub csi: Option<Arc<CsiVolume>>,
}

/// A volume as its pod declares it, read in place: the pod's shared [`KeptPod`] and the
/// volume's index. A copy would cost kilobytes a volume (a k8s-openapi `Volume` holds every
/// kind of source inline), kept for every pod in the desired state.
#[derive(Clone)]
pub struct VolumeSpec {
    pod: KeptPod,
    index: usize,
}

impl VolumeSpec {
    /// Volume `index` of `pod`'s `spec.volumes`, which must exist.
    fn of(pod: &KeptPod, index: usize) -> Self {
        let spec = Self {
            pod: pod.clone(),
            index,
        };
        debug_assert!(
            volumes(&spec.pod.pod()).get(index).is_some(),
            "no volume {index}"
        );
        spec
    }

    /// The volume (its pod decoded while the answer is held).
    pub fn volume(&self) -> VolumeRef {
        self.volume_in(&self.pod.pod())
    }

    /// The volume as `pod` declares it: `pod` is this volume's pod, in this version or a later
    /// one (a pod's volumes never change), already decoded by the caller.
    pub fn volume_in(&self, pod: &Arc<Pod>) -> VolumeRef {
        VolumeRef {
            pod: Arc::clone(pod),
            index: self.index,
        }
    }
}

fn volumes(pod: &Pod) -> &[Volume] {
    (pod.spec.as_ref())
        .and_then(|spec| spec.volumes.as_deref())
        .unwrap_or_default()
}

/// A [`VolumeSpec`] read.
pub struct VolumeRef {
    pod: Arc<Pod>,
    index: usize,
}

impl std::ops::Deref for VolumeRef {
    type Target = Volume;

    fn deref(&self) -> &Volume {
        &volumes(&self.pod)[self.index]
    }
}

/// A volume on its own, held in a pod of its own (tests build operations from bare volumes).
impl From<Volume> for VolumeSpec {
    fn from(volume: Volume) -> Self {
        let pod = Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                volumes: Some(vec![volume]),
                ..Default::default()
            }),
            ..Default::default()
        };
        Self::of(&KeptPod::from(pod), 0)
    }
}

impl PartialEq for VolumeSpec {
    fn eq(&self, other: &Self) -> bool {
        (self.pod.ptr_eq(&other.pod) && self.index == other.index)
            || *self.volume() == *other.volume()
    }
}

impl std::fmt::Debug for VolumeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (*self.volume()).fmt(f)
    }
}

/// Why a volume of a pod cannot enter the desired state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Retrying does not help until nodepulse supports the kind.
    #[error("volume {volume:?}: {kind} volumes are not supported by nodepulse yet")]
    Unsupported { volume: String, kind: &'static str },
    /// A container mounts a volume the pod spec does not declare (the API server rejects such
    /// pods; seen only from a hand-made object).
    #[error("volume {volume:?} is mounted by a container but not declared in the pod spec")]
    Undeclared { volume: String },
    /// The claim cannot be used yet (not bound, PV missing, ...); the actor resolves it again.
    #[error("{error}")]
    Claim {
        volume: String,
        #[source]
        error: ClaimError,
    },
}

impl SpecError {
    /// The outer name of the volume that cannot enter the desired state.
    pub fn volume(&self) -> &str {
        match self {
            SpecError::Unsupported { volume, .. }
            | SpecError::Undeclared { volume }
            | SpecError::Claim { volume, .. } => volume,
        }
    }
}

/// The volumes of `pod` its containers use, and the errors of those nodepulse cannot serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    pub volumes: Vec<PodVolume>,
    pub errors: Vec<SpecError>,
    /// Claim volumes not resolved yet, by outer name.
    pub unresolved: Vec<String>,
}

/// The pod's volumes referenced by a `volumeMounts` or `volumeDevices` entry of an init,
/// regular or ephemeral container; claim volumes count as unresolved.
pub fn pod_volumes(pod: &Pod) -> PodVolumes {
    pod_volumes_with(&KeptPod::from(pod.clone()), &ResolvedClaims::new())
}

/// [`pod_volumes`] with the claims resolved so far: a resolved claim is its CSI volume, a failed
/// one the pod's error.
pub fn pod_volumes_with(kept: &KeptPod, claims: &ResolvedClaims) -> PodVolumes {
    let pod = kept.pod();
    let Some(spec) = &pod.spec else {
        return PodVolumes::default();
    };
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let referenced = referenced_volume_names(&pod);
    let declared = spec.volumes.as_deref().unwrap_or_default();
    let mut out = PodVolumes::default();
    for name in &referenced {
        let found = declared.iter().position(|volume| &volume.name == name);
        match found.map(|index| (index, &declared[index])) {
            None => out.errors.push(SpecError::Undeclared {
                volume: name.clone(),
            }),
            Some((index, volume)) if volume.persistent_volume_claim.is_some() => {
                match claims.get(&(uid.to_owned(), volume.name.clone())) {
                    None => out.unresolved.push(volume.name.clone()),
                    Some(Err(error)) => out.errors.push(SpecError::Claim {
                        volume: volume.name.clone(),
                        error: error.clone(),
                    }),
                    Some(Ok(resolved)) => out.volumes.push(PodVolume {
                        name: volume.name.clone(),
                        plugin: Plugin::Csi,
                        unique_name: resolved.unique_name.clone(),
                        attachable: resolved.attachable,
                        spec: VolumeSpec::of(kept, index),
                        csi: Some(Arc::clone(&resolved.volume)),
                    }),
                }
            }
            Some((index, volume)) => match plugin_of(volume) {
                Ok(plugin) => out.volumes.push(PodVolume {
                    name: volume.name.clone(),
                    plugin,
                    unique_name: UniqueVolumeName::pod_scoped(plugin, uid, &volume.name),
                    attachable: false,
                    spec: VolumeSpec::of(kept, index),
                    csi: None,
                }),
                Err(kind) => out.errors.push(SpecError::Unsupported {
                    volume: volume.name.clone(),
                    kind,
                }),
            },
        }
    }
    out
}

/// The plugin serving `volume`, or the name of its unsupported source.
fn plugin_of(volume: &Volume) -> Result<Plugin, &'static str> {
    if volume.empty_dir.is_some() {
        Ok(Plugin::EmptyDir)
    } else if volume.config_map.is_some() {
        Ok(Plugin::ConfigMap)
    } else if volume.secret.is_some() {
        Ok(Plugin::Secret)
    } else if volume.downward_api.is_some() {
        Ok(Plugin::DownwardApi)
    } else if volume.projected.is_some() {
        Ok(Plugin::Projected)
    } else if volume.host_path.is_some() {
        Ok(Plugin::HostPath)
    } else if volume.image.is_some() {
        Ok(Plugin::Image)
    } else if volume.csi.is_some() {
        Err("csi")
    } else if volume.ephemeral.is_some() {
        Err("ephemeral")
    } else {
        Err("this")
    }
}

/// Names of the volumes some container mounts, sorted.
fn referenced_volume_names(pod: &Pod) -> BTreeSet<String> {
    let Some(spec) = &pod.spec else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.volume_mounts.as_deref(), c.volume_devices.as_deref()));
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| (c.volume_mounts.as_deref(), c.volume_devices.as_deref()));
    for (mounts, devices) in containers.chain(ephemeral) {
        names.extend(mounts.unwrap_or_default().iter().map(|m| m.name.clone()));
        names.extend(devices.unwrap_or_default().iter().map(|d| d.name.clone()));
    }
    names
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
