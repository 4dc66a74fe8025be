//! What a directory holds as the kubelet's `du` and inode walk measure it (a container's logs,
//! a pod's volumes): the blocks allocated to every file under it and the number of inodes, on
//! its own filesystem only, never following a symlink.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use nodepulse_actors::ports::HostError;

/// Bytes allocated and inodes used under one directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskUsage {
    pub used_bytes: u64,
    pub inodes_used: u64,
}

/// Walks `dir` (it included); an entry that vanishes during the walk is skipped, as files
/// come and go under a running container. `dir` itself must exist.
pub fn disk_usage(dir: &Path) -> Result<DiskUsage, HostError> {
    let top = std::fs::symlink_metadata(dir).map_err(|error| HostError::Read {
        path: dir.to_owned(),
        message: error.to_string(),
    })?;
    let device = top.dev();
    let mut usage = DiskUsage::default();
    let mut pending: Vec<(PathBuf, std::fs::Metadata)> = vec![(dir.to_owned(), top)];
    while let Some((path, metadata)) = pending.pop() {
        // st_blocks counts 512-byte units whatever the filesystem's block size.
        usage.used_bytes = usage.used_bytes.saturating_add(metadata.blocks() * 512);
        usage.inodes_used += 1;
        if !metadata.is_dir() || metadata.dev() != device {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(metadata) = entry.metadata() {
                pending.push((entry.path(), metadata));
            }
        }
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_under_the_directory_count_but_a_symlinks_target_does_not() {
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("big"), vec![7u8; 1 << 20]).expect("write");
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/file"), vec![1u8; 64 * 1024]).expect("write");
        std::os::unix::fs::symlink(outside.path().join("big"), dir.path().join("link"))
            .expect("symlink");
        let usage = disk_usage(dir.path()).expect("walks");
        // The directory, sub, file and the link itself.
        assert_eq!(usage.inodes_used, 4);
        assert!(usage.used_bytes >= 64 * 1024, "{usage:?}");
        assert!(
            usage.used_bytes < 1 << 20,
            "the link's target is not counted: {usage:?}"
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let error = disk_usage(Path::new("/no/such/dir")).expect_err("missing");
        assert!(error.to_string().contains("/no/such/dir"), "{error}");
    }
}
