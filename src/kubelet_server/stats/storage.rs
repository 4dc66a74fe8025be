//! The full summary's storage figures, as the kubelet measures them: each container's
//! writable layer (`rootfs`: the runtime's used bytes and inodes on its filesystem's capacity)
//! and logs (a walk of its log directory under `podLogsDir`), each pod's volumes (a walk of the
//! volume's directory; a CSI volume's filesystem as statvfs sees it; host paths have no
//! figures, as the kubelet's hostPath plugin has none) and its ephemeral storage (writable
//! layers, logs and the local ephemeral volumes: emptyDir on disk, configMap, gitRepo).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Volume;
use nodepulse_actors::{
    pods::PodsSnapshot,
    ports::{ContainerState, ContainerUsage, ImageFsUsage},
    volume_manager::{PodVolumeView, VolumeView},
};

use super::{
    node::fs_stats,
    summary::{FsStats, PodStats, PvcReference, VolumeStats},
};
use crate::host::{HostProbe, disk_usage::disk_usage, filesystem};

/// How a volume's figures are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measure {
    /// The walk of its directory for used bytes and inodes, its filesystem for the rest.
    Walk,
    /// Its filesystem alone (a CSI volume is a filesystem of its own).
    Filesystem,
}

/// One mounted volume of a pod, to measure.
#[derive(Debug, Clone)]
struct PodVolume {
    name: String,
    path: PathBuf,
    measure: Measure,
    pvc_ref: Option<PvcReference>,
    /// Counted in the pod's ephemeral storage (the kubelet's `IsLocalEphemeralVolume`).
    local_ephemeral: bool,
}

/// One container's files: its log directory and its writable layer.
#[derive(Debug, Clone)]
struct ContainerFiles {
    name: String,
    log_dir: Option<PathBuf>,
    writable_layer: Option<ImageFsUsage>,
}

/// What is measured for one pod.
#[derive(Debug, Clone)]
pub struct PodFiles {
    uid: String,
    containers: Vec<ContainerFiles>,
    volumes: Vec<PodVolume>,
}

fn pvc_ref(pod: &k8s_openapi::api::core::v1::Pod, volume: &Volume) -> Option<PvcReference> {
    let metadata = &pod.metadata;
    let namespace = metadata.namespace.clone().unwrap_or_default();
    let name = match (&volume.persistent_volume_claim, &volume.ephemeral) {
        (Some(claim), _) => claim.claim_name.clone(),
        // The generic ephemeral volume's claim: `<pod>-<volume>`.
        (None, Some(_)) => format!(
            "{}-{}",
            metadata.name.as_deref().unwrap_or_default(),
            volume.name
        ),
        (None, None) => return None,
    };
    Some(PvcReference { name, namespace })
}

/// What to measure for `pods`, read from the pods view, the runtime's figures and the volume
/// manager's view (cheap: no I/O).
pub fn files(
    pods: &[PodStats],
    containers: &[ContainerUsage],
    snapshot: &PodsSnapshot,
    volumes: Option<&VolumeView>,
) -> Vec<PodFiles> {
    pods.iter()
        .map(|stats| {
            let uid = &stats.pod_ref.uid;
            let record = snapshot.by_uid(uid);
            let containers = (stats.containers.iter())
                .map(|container| {
                    let instance = record.and_then(|pod| {
                        (pod.containers.iter()).find(|c| {
                            c.name == container.name && c.state == ContainerState::Running
                        })
                    });
                    ContainerFiles {
                        name: container.name.clone(),
                        log_dir: instance
                            .and_then(|c| c.log_path.parent().map(Path::to_owned))
                            .filter(|dir| !dir.as_os_str().is_empty()),
                        writable_layer: instance.and_then(|c| {
                            (containers.iter().find(|usage| usage.id == c.id))
                                .and_then(|usage| usage.writable_layer.clone())
                        }),
                    }
                })
                .collect();
            PodFiles {
                uid: uid.clone(),
                containers,
                volumes: volumes
                    .map(|view| pod_volumes(view, uid))
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Every mounted claim's volume directory, pod by pod: what `kubelet_volume_stats_*` measure.
pub fn claim_volumes(view: &VolumeView) -> Vec<(PvcReference, PathBuf)> {
    let uids = view
        .pods()
        .iter()
        .filter_map(|pod| pod.metadata.uid.clone())
        .collect::<Vec<_>>();
    uids.iter()
        .flat_map(|uid| pod_volumes(view, uid))
        .filter_map(|volume| Some((volume.pvc_ref?, volume.path)))
        .collect()
}

fn pod_volumes(view: &VolumeView, uid: &str) -> Vec<PodVolume> {
    let Some(pod) = view.pod(uid) else {
        return Vec::new();
    };
    let specs: BTreeMap<&str, &Volume> = (pod.spec.iter())
        .flat_map(|spec| spec.volumes.iter().flatten())
        .map(|volume| (volume.name.as_str(), volume))
        .collect();
    view.host_paths(uid)
        .into_iter()
        .filter_map(|(name, path)| {
            let spec = specs.get(name.as_str())?;
            if spec.host_path.is_some() {
                return None;
            }
            let empty_dir_on_disk = (spec.empty_dir.as_ref())
                .is_some_and(|dir| dir.medium.as_deref().unwrap_or_default().is_empty());
            let claimed = spec.persistent_volume_claim.is_some() || spec.ephemeral.is_some();
            Some(PodVolume {
                measure: if claimed || spec.csi.is_some() {
                    Measure::Filesystem
                } else {
                    Measure::Walk
                },
                pvc_ref: pvc_ref(&pod, spec),
                local_ephemeral: empty_dir_on_disk
                    || spec.config_map.is_some()
                    || spec.git_repo.is_some(),
                name,
                path,
            })
        })
        .collect()
}

/// Measures `files` (blocking: walks directories) and writes the figures into `pods`; `nodefs`
/// is the node's filesystem, which holds the logs and the ephemeral storage.
pub fn measure(
    pods: &mut [PodStats],
    files: &[PodFiles],
    host: &HostProbe,
    nodefs: Option<&FsStats>,
    time: Timestamp,
) {
    // Log and volume paths are the daemon's own (it reads and writes them); the runtime's
    // mountpoints are the host's, seen under `hostRoot`.
    let mut filesystems: BTreeMap<PathBuf, Option<FsStats>> = BTreeMap::new();
    let mut filesystem_of = |path: &Path| {
        (filesystems.entry(path.to_owned()))
            .or_insert_with(|| {
                (filesystem(path))
                    .inspect_err(|error| tracing::debug!(%error, "no filesystem figures"))
                    .ok()
                    .map(|fs| fs_stats(time, &fs))
            })
            .clone()
    };
    for (pod, files) in pods.iter_mut().zip(files) {
        debug_assert_eq!(pod.pod_ref.uid, files.uid);
        for (container, container_files) in pod.containers.iter_mut().zip(&files.containers) {
            debug_assert_eq!(container.name, container_files.name);
            container.rootfs = container_files.writable_layer.as_ref().map(|layer| {
                let fs = filesystem_of(&host.host_path(&layer.mountpoint));
                FsStats {
                    used_bytes: layer.used_bytes,
                    inodes_used: layer.inodes_used,
                    ..on(fs.as_ref(), time)
                }
            });
            container.logs =
                (container_files.log_dir.as_ref()).and_then(|dir| walked(dir, nodefs, time));
        }
        let mut volumes = Vec::new();
        let mut ephemeral_volumes = Vec::new();
        for volume in &files.volumes {
            let measured = match volume.measure {
                Measure::Walk => walked(&volume.path, None, time).map(|used| {
                    let fs = filesystem_of(&volume.path);
                    FsStats {
                        used_bytes: used.used_bytes,
                        inodes_used: used.inodes_used,
                        ..on(fs.as_ref(), time)
                    }
                }),
                Measure::Filesystem => filesystem_of(&volume.path),
            };
            let Some(fs) = measured else { continue };
            if volume.local_ephemeral {
                ephemeral_volumes.push(fs.clone());
            }
            volumes.push(VolumeStats {
                fs,
                name: volume.name.clone(),
                pvc_ref: volume.pvc_ref.clone(),
            });
        }
        pod.volume_stats = volumes;
        pod.ephemeral_storage = nodefs.map(|nodefs| ephemeral(pod, &ephemeral_volumes, nodefs));
    }
}

/// A filesystem's capacity figures with nothing used yet.
fn on(fs: Option<&FsStats>, time: Timestamp) -> FsStats {
    FsStats {
        time,
        used_bytes: None,
        inodes_used: None,
        ..fs.cloned().unwrap_or(FsStats {
            time,
            available_bytes: None,
            capacity_bytes: None,
            used_bytes: None,
            inodes_free: None,
            inodes: None,
            inodes_used: None,
        })
    }
}

/// The walk of `dir`, on the capacity figures of `fs`; `None` when it cannot be walked.
fn walked(dir: &Path, fs: Option<&FsStats>, time: Timestamp) -> Option<FsStats> {
    let usage = disk_usage(dir)
        .inspect_err(|error| tracing::debug!(%error, "no disk usage figures"))
        .ok()?;
    Some(FsStats {
        used_bytes: Some(usage.used_bytes),
        inodes_used: Some(usage.inodes_used),
        ..on(fs, time)
    })
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *total = Some(total.unwrap_or(0).saturating_add(value));
    }
}

/// The kubelet's `calcEphemeralStorage`: the node filesystem's capacity, used by the
/// containers' writable layers and logs and the pod's local ephemeral volumes.
fn ephemeral(pod: &PodStats, volumes: &[FsStats], nodefs: &FsStats) -> FsStats {
    let mut result = FsStats {
        used_bytes: None,
        inodes_used: None,
        ..nodefs.clone()
    };
    for container in &pod.containers {
        // The kubelet counts a container's logs only with its writable layer.
        let Some(rootfs) = &container.rootfs else {
            continue;
        };
        add(&mut result.used_bytes, rootfs.used_bytes);
        add(&mut result.inodes_used, rootfs.inodes_used);
        if let Some(logs) = &container.logs {
            add(&mut result.used_bytes, logs.used_bytes);
            add(&mut result.inodes_used, logs.inodes_used);
        }
    }
    for volume in volumes {
        add(&mut result.used_bytes, volume.used_bytes);
        add(&mut result.inodes_used, volume.inodes_used);
    }
    result
}
