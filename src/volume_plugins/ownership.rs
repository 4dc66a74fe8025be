//! A volume given to the pod's `fsGroup`, as the kubelet's `SetVolumeOwnership`
//! (`pkg/volume/volume_linux.go`, §1.14): every path under the volume, children first, gets
//! the group (links themselves, never what they point to), and every file or directory but a
//! link the group's bits — read and write (read only for a read-only volume), directories
//! also search and setgid, so what the container makes there keeps the group. Like the
//! kubelet, a path that cannot be changed is logged and skipped, not an error; only a volume
//! that cannot be walked is.

use std::{
    fs, io,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
};

use super::FsError;

const READ_WRITE: u32 = 0o660;
const READ_ONLY: u32 = 0o440;
const SEARCH: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// The mode a path gets: its own, plus the group's bits the kubelet adds.
pub fn owned_mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut mask = if read_only { READ_ONLY } else { READ_WRITE };
    if is_dir {
        mask |= SETGID | SEARCH;
    }
    (mode & 0o7777) | mask
}

/// Gives everything under `dir` to group `fs_group` (the kubelet's `fsGroupChangePolicy:
/// Always`, all the local plugins use).
pub fn set_volume_ownership(dir: &Path, fs_group: u32, read_only: bool) -> Result<(), FsError> {
    let metadata = fs::symlink_metadata(dir).map_err(FsError::at("stat", dir))?;
    walk(dir, &metadata, fs_group, read_only)
}

fn walk(
    path: &Path,
    metadata: &fs::Metadata,
    fs_group: u32,
    read_only: bool,
) -> Result<(), FsError> {
    if metadata.is_dir() {
        for entry in fs::read_dir(path).map_err(FsError::at("read directory", path))? {
            let entry = entry.map_err(FsError::at("read directory", path))?;
            let child = entry.path();
            match fs::symlink_metadata(&child) {
                Ok(child_metadata) => walk(&child, &child_metadata, fs_group, read_only)?,
                Err(error) => skipped(&child, "stat", &error),
            }
        }
    }
    change(path, metadata, fs_group, read_only);
    Ok(())
}

fn change(path: &Path, metadata: &fs::Metadata, fs_group: u32, read_only: bool) {
    if metadata.gid() != fs_group
        && let Err(error) = std::os::unix::fs::lchown(path, None, Some(fs_group))
    {
        skipped(path, "lchown", &error);
    }
    // A link's mode means nothing, and chmod would reach the file it points to.
    if metadata.file_type().is_symlink() {
        return;
    }
    let mode = owned_mode(metadata.mode(), metadata.is_dir(), read_only);
    if mode != metadata.mode() & 0o7777
        && let Err(error) = fs::set_permissions(path, fs::Permissions::from_mode(mode))
    {
        skipped(path, "chmod", &error);
    }
}

fn skipped(path: &Path, step: &str, error: &io::Error) {
    tracing::warn!(path = %path.display(), %error, "{step} failed while giving a volume to its fsGroup");
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn the_kubelets_masks_add_group_bits_and_setgid_on_directories() {
        assert_eq!(owned_mode(0o644, false, false), 0o664);
        assert_eq!(owned_mode(0o400, false, true), 0o440);
        assert_eq!(owned_mode(0o755, true, true), 0o2755);
        assert_eq!(owned_mode(0o777, true, false), 0o2777);
        assert_eq!(owned_mode(0o700, true, false), 0o2770);
        assert_eq!(owned_mode(0o100_644, false, false), 0o664);
    }

    #[test]
    fn every_path_gets_the_group_and_links_keep_their_targets_mode() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let root = dir.path().join("vol");
        fs::create_dir_all(root.join("..data_dir/sub")).expect("dirs");
        let file = root.join("..data_dir/sub/key");
        fs::write(&file, b"v").expect("file");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o400)).expect("chmod");
        symlink("..data_dir/sub/key", root.join("key")).expect("link");
        // Outside the volume: a link to it must not hand it over.
        let outside = dir.path().join("outside");
        fs::write(&outside, b"x").expect("file");
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o600)).expect("chmod");
        symlink(&outside, root.join("escape")).expect("link");
        let root_mode = fs::metadata(&root).expect("stat").mode();
        set_volume_ownership(&root, 4321, true).expect("owned");
        let meta = |p: &Path| fs::symlink_metadata(p).expect("stat");
        assert_eq!(meta(&file).gid(), 4321);
        assert_eq!(meta(&file).mode() & 0o7777, 0o440);
        assert_eq!(
            meta(&root).mode() & 0o7777,
            owned_mode(root_mode, true, true)
        );
        assert_ne!(meta(&root).mode() & 0o2000, 0, "setgid on directories");
        assert_eq!(meta(&root.join("..data_dir/sub")).gid(), 4321);
        assert_eq!(meta(&root.join("key")).gid(), 4321, "the link itself");
        assert_eq!(meta(&outside).gid(), 0, "not what a link points to");
        assert_eq!(meta(&outside).mode() & 0o7777, 0o600);
    }
}
