//! `vol_data.json`, the file the kubelet writes beside every CSI staging and publish directory
//! so that, after a restart, it knows which driver and volume a directory holds (§1.5): Go's
//! `json.Marshal` of a string map (keys sorted, no spaces), read back as such. Rewritten in
//! place at each SetUp, as the kubelet's, but never through a link planted at its name.

use std::{
    collections::BTreeMap,
    io::{self, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use nodepulse_actors::volume_manager::{Plugin, UniqueVolumeName};

use super::layout::vol_data_path;

/// The keys the kubelet writes (`volDataKey`).
pub mod keys {
    pub const DRIVER_NAME: &str = "driverName";
    pub const VOLUME_HANDLE: &str = "volumeHandle";
    pub const SPEC_VOLUME_ID: &str = "specVolID";
    pub const NODE_NAME: &str = "nodeName";
    pub const ATTACHMENT_ID: &str = "attachmentID";
    pub const LIFECYCLE_MODE: &str = "volumeLifecycleMode";
}

/// Why a `vol_data.json` could not be read back; the directory is then not taken over.
#[derive(Debug, thiserror::Error)]
pub enum VolDataError {
    #[error("read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("parse {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: no {key}", path.display())]
    Missing { path: PathBuf, key: &'static str },
}

/// Writes `data` as the `vol_data.json` beside `mount_dir`.
pub fn save(mount_dir: &Path, data: &BTreeMap<&str, String>) -> io::Result<()> {
    let json = serde_json::to_vec(data).map_err(io::Error::other)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(vol_data_path(mount_dir))?
        .write_all(&json)
}

/// The `vol_data.json` beside `mount_dir`.
pub fn load(mount_dir: &Path) -> Result<BTreeMap<String, String>, VolDataError> {
    let path = vol_data_path(mount_dir);
    let text = std::fs::read(&path).map_err(|source| VolDataError::Read {
        path: path.clone(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| VolDataError::Parse { path, source })
}

/// The unique volume name a reconstructed directory holds: `kubernetes.io/csi/<driver>^<handle>`.
pub fn unique_name(mount_dir: &Path) -> Result<UniqueVolumeName, VolDataError> {
    let data = load(mount_dir)?;
    let get = |key: &'static str| {
        data.get(key)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| VolDataError::Missing {
                path: vol_data_path(mount_dir),
                key,
            })
    };
    let (driver, handle) = (get(keys::DRIVER_NAME)?, get(keys::VOLUME_HANDLE)?);
    Ok(UniqueVolumeName::attachable(
        Plugin::Csi,
        &format!("{driver}^{handle}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_go_writes_a_map_and_read_back_to_the_unique_name() {
        let dir = tempfile::tempdir().expect("dir");
        let mount = dir.path().join("pv-1").join("mount");
        std::fs::create_dir_all(mount.parent().expect("parent")).expect("parent");
        let data = BTreeMap::from([
            (keys::VOLUME_HANDLE, "h".to_owned()),
            (keys::DRIVER_NAME, "d".to_owned()),
        ]);
        save(&mount, &data).expect("saved");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("pv-1").join("vol_data.json")).expect("read"),
            r#"{"driverName":"d","volumeHandle":"h"}"#
        );
        assert_eq!(
            unique_name(&mount).expect("named").as_str(),
            "kubernetes.io/csi/d^h"
        );
    }

    #[test]
    fn a_link_at_its_name_is_refused_not_written_through() {
        let dir = tempfile::tempdir().expect("dir");
        let precious = dir.path().join("precious");
        std::fs::write(&precious, "the host's file").expect("written");
        let mount = dir.path().join("pv-1").join("mount");
        std::fs::create_dir_all(mount.parent().expect("parent")).expect("parent");
        std::os::unix::fs::symlink(&precious, vol_data_path(&mount)).expect("planted");
        let data = BTreeMap::from([(keys::DRIVER_NAME, "d".to_owned())]);
        save(&mount, &data).expect_err("a link is refused");
        assert_eq!(
            std::fs::read_to_string(&precious).expect("read"),
            "the host's file"
        );
    }

    #[test]
    fn a_missing_or_incomplete_file_is_an_error_not_a_guess() {
        let dir = tempfile::tempdir().expect("dir");
        let mount = dir.path().join("pv-1").join("mount");
        assert!(matches!(
            unique_name(&mount),
            Err(VolDataError::Read { .. })
        ));
        std::fs::create_dir_all(mount.parent().expect("parent")).expect("parent");
        save(
            &mount,
            &BTreeMap::from([(keys::DRIVER_NAME, "d".to_owned())]),
        )
        .expect("saved");
        let error = unique_name(&mount).expect_err("no handle");
        assert!(
            error
                .to_string()
                .ends_with("vol_data.json: no volumeHandle"),
            "{error}"
        );
    }
}
