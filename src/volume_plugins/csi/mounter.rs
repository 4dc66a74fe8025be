//! [`CsiNode`] as the kubelet's CSI attacher and mounter do it: the staging directory and its
//! `vol_data.json` before NodeStageVolume (only for drivers with STAGE_UNSTAGE_VOLUME), the
//! publish directory's parent and its `vol_data.json` before NodePublishVolume, and on the way
//! back the calls first, then the directories, never removing anything still mounted.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::{
    ports::{CsiError, CsiNode, CsiPod, CsiVolume},
    volume_manager::PodDirs,
};

use super::{
    client::CsiClient,
    drivers::CsiDrivers,
    layout::{attachment_name, publish_target, staging_path, vol_data_path},
    vol_data::{self, keys},
};
use crate::volume_plugins::mount::is_likely_mount_point;

/// The CSI volume operations of one node under its `rootDir`.
#[derive(Clone)]
pub struct CsiMounter {
    dirs: PodDirs,
    drivers: CsiDrivers,
}

impl CsiMounter {
    pub fn new(dirs: PodDirs, drivers: CsiDrivers) -> Self {
        Self { dirs, drivers }
    }

    fn client(&self, operation: &'static str, driver: &str) -> Result<CsiClient, CsiError> {
        self.drivers
            .client(driver)
            .ok_or_else(|| CsiError::DriverNotRegistered {
                operation,
                driver: driver.to_owned(),
            })
    }

    async fn mount_device(&self, volume: CsiVolume) -> Result<Option<PathBuf>, CsiError> {
        const OPERATION: &str = "attacher.MountDevice";
        let client = self.client(OPERATION, &volume.driver)?;
        let stage = client
            .node_supports_stage_unstage()
            .await
            .map_err(CsiError::Call)?;
        let staging = staging_path(self.dirs.root_dir(), &volume.driver, &volume.volume_handle);
        // Kept even when the driver does not stage: UnmountDevice reads it back.
        make_dir_0750(OPERATION, &staging)?;
        save_vol_data(
            OPERATION,
            &staging,
            &BTreeMap::from([
                (keys::DRIVER_NAME, volume.driver.clone()),
                (keys::VOLUME_HANDLE, volume.volume_handle.clone()),
            ]),
        )?;
        if !stage {
            tracing::debug!(driver = %volume.driver, "STAGE_UNSTAGE_VOLUME not set; skipping MountDevice");
            return Ok(None);
        }
        if let Err(error) = client.node_stage_volume(&volume, &staging).await {
            remove_mount_dir(OPERATION, &staging)?;
            return Err(CsiError::Call(error));
        }
        Ok(Some(staging))
    }

    async fn set_up(&self, pod: CsiPod, volume: CsiVolume) -> Result<PathBuf, CsiError> {
        const OPERATION: &str = "mounter.SetUpAt";
        let client = self.client(OPERATION, &volume.driver)?;
        let stage = client
            .node_supports_stage_unstage()
            .await
            .map_err(|source| CsiError::Capabilities {
                operation: OPERATION,
                source,
            })?;
        let staging = stage
            .then(|| staging_path(self.dirs.root_dir(), &volume.driver, &volume.volume_handle));
        let target = publish_target(&self.dirs, &pod.uid, &volume.pv_name);
        let parent = target.parent().unwrap_or(&target).to_path_buf();
        make_dir_0750(OPERATION, &parent)?;
        save_vol_data(
            OPERATION,
            &target,
            &BTreeMap::from([
                (
                    keys::ATTACHMENT_ID,
                    attachment_name(&volume.volume_handle, &volume.driver, &pod.node_name),
                ),
                (keys::DRIVER_NAME, volume.driver.clone()),
                (keys::NODE_NAME, pod.node_name.clone()),
                (keys::SPEC_VOLUME_ID, volume.pv_name.clone()),
                (keys::VOLUME_HANDLE, volume.volume_handle.clone()),
                (keys::LIFECYCLE_MODE, "Persistent".to_owned()),
            ]),
        )?;
        if let Err(error) = client
            .node_publish_volume(&volume, staging.as_deref(), &target)
            .await
        {
            remove_mount_dir(OPERATION, &target)?;
            return Err(CsiError::Call(error));
        }
        Ok(target)
    }

    async fn tear_down(&self, pod_uid: String, volume: CsiVolume) -> Result<(), CsiError> {
        // The kubelet's TearDownAt names SetUpAt when it finds no client; kept for its text.
        let client = self.client("mounter.SetUpAt", &volume.driver)?;
        let target = publish_target(&self.dirs, &pod_uid, &volume.pv_name);
        client
            .node_unpublish_volume(&volume.volume_handle, &target)
            .await
            .map_err(CsiError::Unpublish)?;
        remove_mount_dir("mounter.TearDownAt", &target)
    }

    async fn unmount_device(&self, volume: CsiVolume) -> Result<(), CsiError> {
        const OPERATION: &str = "attacher.UnmountDevice";
        let client = self.client(OPERATION, &volume.driver)?;
        let staging = staging_path(self.dirs.root_dir(), &volume.driver, &volume.volume_handle);
        let stage = client
            .node_supports_stage_unstage()
            .await
            .map_err(CsiError::Unstage)?;
        if stage {
            client
                .node_unstage_volume(&volume.volume_handle, &staging)
                .await
                .map_err(CsiError::Unstage)?;
        }
        remove_mount_dir(OPERATION, &staging)
    }
}

impl CsiNode for CsiMounter {
    fn mount_device(
        &self,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<Option<PathBuf>, CsiError>> {
        let this = self.clone();
        async move { this.mount_device(volume).await }.boxed()
    }

    fn set_up(
        &self,
        pod: CsiPod,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<PathBuf, CsiError>> {
        let this = self.clone();
        async move { this.set_up(pod, volume).await }.boxed()
    }

    fn tear_down(
        &self,
        pod_uid: String,
        volume: CsiVolume,
    ) -> BoxFuture<'static, Result<(), CsiError>> {
        let this = self.clone();
        async move { this.tear_down(pod_uid, volume).await }.boxed()
    }

    fn unmount_device(&self, volume: CsiVolume) -> BoxFuture<'static, Result<(), CsiError>> {
        let this = self.clone();
        async move { this.unmount_device(volume).await }.boxed()
    }
}

fn filesystem_error(
    operation: &'static str,
    step: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> CsiError {
    let path = path.to_path_buf();
    move |error| CsiError::Filesystem {
        operation,
        step,
        path,
        message: error.to_string(),
    }
}

fn make_dir_0750(operation: &'static str, dir: &Path) -> Result<(), CsiError> {
    fs::create_dir_all(dir).map_err(filesystem_error(operation, "create dir", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o750)).map_err(filesystem_error(
        operation,
        "create dir",
        dir,
    ))
}

fn save_vol_data(
    operation: &'static str,
    mount_dir: &Path,
    data: &BTreeMap<&str, String>,
) -> Result<(), CsiError> {
    vol_data::save(mount_dir, data).map_err(filesystem_error(
        operation,
        "save volume data",
        &vol_data_path(mount_dir),
    ))
}

/// The kubelet's `removeMountDir`: when `mount_dir` is no longer a mount point, remove it, its
/// `vol_data.json` and their parent; when it still is, leave everything (never delete data).
fn remove_mount_dir(operation: &'static str, mount_dir: &Path) -> Result<(), CsiError> {
    let mounted = match is_likely_mount_point(mount_dir) {
        Ok(mounted) => mounted,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => {
            return Err(filesystem_error(operation, "check mount point", mount_dir)(
                error,
            ));
        }
    };
    if mounted {
        return Ok(());
    }
    let data = vol_data_path(mount_dir);
    let parent = mount_dir.parent().unwrap_or(mount_dir);
    let gone = |result: std::io::Result<()>| match result {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    };
    gone(fs::remove_dir(mount_dir)).map_err(filesystem_error(
        operation,
        "remove dir",
        mount_dir,
    ))?;
    gone(fs::remove_file(&data)).map_err(filesystem_error(
        operation,
        "delete volume data file",
        &data,
    ))?;
    gone(fs::remove_dir(parent)).map_err(filesystem_error(
        operation,
        "delete volume path",
        parent,
    ))?;
    Ok(())
}
