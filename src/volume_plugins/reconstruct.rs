//! Rebuilds the actual state of the world from disk after a restart (§1.5): every
//! `<root>/pods/<uid>/volumes/<escaped plugin>/<volume>` becomes an uncertain mount, and every
//! pod directory is listed so orphans can be cleaned up (§1.17); a CSI volume is read back
//! through its `vol_data.json`, and so is every CSI staging directory (a volume staged for the
//! node, published or not). Reads only; never deletes.

use std::{fs, io, path::Path, sync::Arc};

use nodepulse_actors::{
    ports::CsiVolume,
    volume_manager::{
        ActualState, MountState, MountedVolume, Plugin, PodDirs, StagedDevice, UniqueVolumeName,
        csi_unique_name,
    },
};

use super::csi::{layout::staging_path, vol_data};

/// A volume directory found on disk that nodepulse cannot take over (an unknown plugin, e.g.
/// one a kubelet left behind). It is never deleted by nodepulse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedReconstruction {
    pub pod_uid: String,
    pub plugin_dir: String,
    pub volume: String,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconstructed {
    pub actual: ActualState,
    pub failed: Vec<FailedReconstruction>,
}

/// Why the scan failed; retrying helps once the directory is readable.
#[derive(Debug, thiserror::Error)]
#[error("reconstruct volumes: read {}: {source}", path.display())]
pub struct ReconstructError {
    path: std::path::PathBuf,
    #[source]
    source: io::Error,
}

/// Scans `<root>/pods`. Every volume found is an uncertain mount with no setup time: the
/// reconciler re-runs its (idempotent) SetUp if a pod still wants it and tears it down once
/// the desired state, fully populated, does not. A missing `pods` directory is an empty node.
pub fn reconstruct(dirs: &PodDirs) -> Result<Reconstructed, ReconstructError> {
    let mut found = Reconstructed::default();
    for pod_uid in subdirectories(&dirs.pods_dir())? {
        for plugin_dir in subdirectories(&dirs.pod_volumes_dir(&pod_uid))? {
            let volumes_of_plugin = dirs.pod_volumes_dir(&pod_uid).join(&plugin_dir);
            for volume in subdirectories(&volumes_of_plugin)? {
                match Plugin::from_escaped_name(&plugin_dir) {
                    Some(Plugin::Csi) => {
                        let mount_dir = volumes_of_plugin.join(&volume).join("mount");
                        match csi_mount(&volume, &mount_dir) {
                            Some(mounted) => {
                                found
                                    .actual
                                    .mounts
                                    .insert((pod_uid.clone(), volume.clone()), mounted);
                            }
                            None => found.failed.push(FailedReconstruction {
                                pod_uid: pod_uid.clone(),
                                plugin_dir: plugin_dir.clone(),
                                volume,
                            }),
                        }
                    }
                    Some(plugin) => {
                        found.actual.mounts.insert(
                            (pod_uid.clone(), volume.clone()),
                            MountedVolume {
                                plugin,
                                unique_name: UniqueVolumeName::pod_scoped(
                                    plugin, &pod_uid, &volume,
                                ),
                                attachable: false,
                                state: MountState::Uncertain,
                                set_up_at: None,
                                csi: None,
                            },
                        );
                    }
                    // Others are not ours.
                    None => found.failed.push(FailedReconstruction {
                        pod_uid: pod_uid.clone(),
                        plugin_dir: plugin_dir.clone(),
                        volume,
                    }),
                }
            }
        }
        found.actual.pod_dirs.insert(pod_uid);
    }
    found.actual.devices = staged_devices(dirs)?;
    Ok(found)
}

/// Every `<root>/plugins/kubernetes.io/csi/<driver>/<hash>/globalmount` whose `vol_data.json`
/// names its driver and handle (and hashes to its directory): an uncertain staged device. The
/// kubelet reconstructs devices only through the pods' publish directories, so a restart
/// between a pod's unpublish and its unstage leaves the device staged and out of
/// `volumesInUse`, open to a detach; read back, it is in use until unstaged.
fn staged_devices(
    dirs: &PodDirs,
) -> Result<std::collections::BTreeMap<UniqueVolumeName, StagedDevice>, ReconstructError> {
    let mut devices = std::collections::BTreeMap::new();
    let csi_dir = dirs.root_dir().join("plugins").join(Plugin::Csi.name());
    for driver in subdirectories(&csi_dir)? {
        for hash in subdirectories(&csi_dir.join(&driver))? {
            let mount_dir = csi_dir.join(&driver).join(&hash).join("globalmount");
            let Ok(data) = vol_data::load(&mount_dir) else {
                continue;
            };
            let field = |key: &str| data.get(key).cloned().unwrap_or_default();
            let volume = CsiVolume {
                driver: field(vol_data::keys::DRIVER_NAME),
                volume_handle: field(vol_data::keys::VOLUME_HANDLE),
                ..CsiVolume::default()
            };
            let ours = staging_path(dirs.root_dir(), &volume.driver, &volume.volume_handle);
            if volume.driver != driver || ours != mount_dir {
                tracing::warn!(dir = %mount_dir.display(), "a CSI staging directory whose vol_data.json names another volume; left alone");
                continue;
            }
            devices.insert(
                csi_unique_name(&volume),
                StagedDevice {
                    csi: volume,
                    attachable: true,
                    state: MountState::Uncertain,
                },
            );
        }
    }
    Ok(devices)
}

/// A CSI publish directory read back through its `vol_data.json`: keyed by its PV's name until
/// the volume manager adopts it under the pod's volume name. Counted attachable (so it stays in
/// `volumesInUse`) until then: the disk does not say, and a detach under a mount is worse.
fn csi_mount(pv_name: &str, mount_dir: &Path) -> Option<MountedVolume> {
    let data = match vol_data::load(mount_dir) {
        Ok(data) => data,
        Err(error) => {
            tracing::warn!(%error, "cannot take over a CSI volume directory");
            return None;
        }
    };
    let field = |key: &str| data.get(key).cloned().unwrap_or_default();
    let volume = CsiVolume {
        driver: field(vol_data::keys::DRIVER_NAME),
        volume_handle: field(vol_data::keys::VOLUME_HANDLE),
        pv_name: pv_name.to_owned(),
        ..CsiVolume::default()
    };
    if volume.driver.is_empty() || volume.volume_handle.is_empty() {
        tracing::warn!(dir = %mount_dir.display(), "a CSI volume directory without driver or handle");
        return None;
    }
    Some(MountedVolume {
        plugin: Plugin::Csi,
        unique_name: csi_unique_name(&volume),
        attachable: true,
        state: MountState::Uncertain,
        set_up_at: None,
        csi: Some(Arc::new(volume)),
    })
}

/// Names of the directories directly under `dir` (not following symlinks), sorted; none if
/// `dir` does not exist.
fn subdirectories(dir: &Path) -> Result<Vec<String>, ReconstructError> {
    let failed = |source| ReconstructError {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(failed(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(failed)?;
        if entry.file_type().map_err(failed)?.is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
#[path = "reconstruct_tests.rs"]
mod tests;
