//! The names the kubelet derives for a CSI volume: its unique name in the desired state and in
//! `volumesInUse` / `volumesAttached`, and the VolumeAttachment the attach/detach controller
//! creates for it on a node (a SHA-256, as the csi attacher's `getAttachmentName`). Pure.

use super::{layout::UniqueVolumeName, plugin::Plugin};
use crate::ports::CsiVolume;

/// Lowercase hex SHA-256 of `input` (Go's `fmt.Sprintf("%x", sha256.Sum256(...))`).
pub fn sha256_hex(input: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, input.as_bytes())
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `csi-<sha256(volumeHandle + driver + nodeName)>`.
pub fn attachment_name(volume_handle: &str, driver: &str, node_name: &str) -> String {
    format!(
        "csi-{}",
        sha256_hex(&format!("{volume_handle}{driver}{node_name}"))
    )
}

/// `kubernetes.io/csi/<driver>^<volumeHandle>`. CSI volumes are device-mountable, so the name is
/// shared by every pod even when no attach is required.
pub fn csi_unique_name(volume: &CsiVolume) -> UniqueVolumeName {
    UniqueVolumeName::attachable(
        Plugin::Csi,
        &format!("{}^{}", volume.driver, volume.volume_handle),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_the_standard_digest_in_lowercase_hex() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn attachment_names_hash_handle_driver_and_node_in_that_order() {
        assert_eq!(
            attachment_name("a", "b", "c"),
            format!("csi-{}", sha256_hex("abc"))
        );
        assert_eq!(attachment_name("a", "b", "c").len(), 4 + 64);
    }
}
