//! Where the kubelet 1.36 keeps a CSI volume on disk (§1.9, §1.15) and the names it derives
//! from SHA-256: the per-node staging directory, the per-pod publish target, their
//! `vol_data.json` (the VolumeAttachment name comes from the pure core's `csi_names`). Path
//! arithmetic only.

use std::path::{Path, PathBuf};

pub use nodepulse_actors::volume_manager::attachment_name;
use nodepulse_actors::volume_manager::{Plugin, PodDirs, csi_names::sha256_hex};

/// The file beside a staging or publish directory that says which volume it is.
pub const VOL_DATA_FILE: &str = "vol_data.json";

/// `<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount`: where the
/// driver stages the volume once for the node (`makeDeviceMountPath`).
pub fn staging_path(root_dir: &Path, driver: &str, volume_handle: &str) -> PathBuf {
    root_dir
        .join("plugins")
        .join(Plugin::Csi.name())
        .join(driver)
        .join(sha256_hex(volume_handle))
        .join("globalmount")
}

/// `<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`: where the driver publishes the
/// volume for one pod, and what its containers mount.
pub fn publish_target(dirs: &PodDirs, pod_uid: &str, pv_name: &str) -> PathBuf {
    dirs.volume_dir(pod_uid, Plugin::Csi, pv_name).join("mount")
}

/// The `vol_data.json` beside `mount_dir` (a staging or publish directory).
pub fn vol_data_path(mount_dir: &Path) -> PathBuf {
    mount_dir.parent().map_or_else(
        || PathBuf::from(VOL_DATA_FILE),
        |dir| dir.join(VOL_DATA_FILE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_path_hashes_the_volume_handle() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            staging_path(Path::new("/var/lib/kubelet"), "csi.example.com", "abc"),
            Path::new(
                "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad/globalmount"
            )
        );
    }

    #[test]
    fn publish_target_is_under_the_escaped_plugin_and_the_pv_name() {
        let dirs = PodDirs::new("/var/lib/kubelet");
        assert_eq!(
            publish_target(&dirs, "u1", "pv-1"),
            Path::new("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-1/mount")
        );
        assert_eq!(
            vol_data_path(&publish_target(&dirs, "u1", "pv-1")),
            Path::new("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-1/vol_data.json")
        );
    }
}
