//! hostPath SetUp as the kubelet does it (`pkg/volume/hostpath`, §1.13): nothing is mounted,
//! the host's path is checked against the volume's `type` (creating it for the `…OrCreate`
//! types) with the kubelet's error texts. It never changes an existing path.

use std::{
    fs, io,
    os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt},
    path::Path,
};

/// The mode `DirectoryOrCreate` creates directories with (before the umask, as the kubelet).
const CREATED_DIR_MODE: u32 = 0o755;
/// The mode `FileOrCreate` creates the file with (before the umask, as the kubelet).
const CREATED_FILE_MODE: u32 = 0o644;

/// Why a hostPath volume cannot be set up. The texts are the kubelet's; only `Create` may
/// succeed on retry (say, once a parent directory appears).
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error("invalid HostPath `{0}`: must not contain '..'")]
    ContainsDotDot(String),
    #[error("hostPath type check failed: {path} is not a {expected}")]
    TypeMismatch {
        path: String,
        expected: &'static str,
    },
    #[error("{0} is an invalid volume type")]
    InvalidType(String),
    #[error("{path}: {source}")]
    Create {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Checks (and for `DirectoryOrCreate`/`FileOrCreate` creates) the host path `path` for a
/// volume of type `path_type` (`None` or `""`: no check at all).
pub fn set_up(path: &str, path_type: Option<&str>) -> Result<(), HostPathError> {
    if path.split('/').any(|element| element == "..") {
        return Err(HostPathError::ContainsDotDot(path.to_owned()));
    }
    let host = Path::new(path);
    let mismatch = |expected| HostPathError::TypeMismatch {
        path: path.to_owned(),
        expected,
    };
    let check = |is: fn(&fs::Metadata) -> bool, expected| {
        // Follows symlinks, as the kubelet's `stat` does; a missing path fails the check.
        match fs::metadata(host) {
            Ok(meta) if is(&meta) => Ok(()),
            _ => Err(mismatch(expected)),
        }
    };
    match path_type.unwrap_or_default() {
        "" => Ok(()),
        "DirectoryOrCreate" if !exists(host) => make_dir(host),
        "DirectoryOrCreate" | "Directory" => check(|m| m.is_dir(), "directory"),
        "FileOrCreate" if !exists(host) => make_file(host),
        "FileOrCreate" | "File" => check(|m| m.is_file(), "file"),
        "Socket" => check(|m| m.file_type().is_socket(), "socket file"),
        "CharDevice" => check(|m| m.file_type().is_char_device(), "character device"),
        "BlockDevice" => check(|m| m.file_type().is_block_device(), "block device"),
        other => Err(HostPathError::InvalidType(other.to_owned())),
    }
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// `mkdir -p` with 0755; an existing directory is fine.
fn make_dir(path: &Path) -> Result<(), HostPathError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(CREATED_DIR_MODE)
        .create(path)
        .map_err(|source| HostPathError::Create {
            path: path.display().to_string(),
            source,
        })
}

/// An empty file with 0644; its parent must exist (the kubelet does not create it).
fn make_file(path: &Path) -> Result<(), HostPathError> {
    match fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(CREATED_FILE_MODE)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(HostPathError::Create {
            path: path.display().to_string(),
            source,
        }),
    }
}

#[cfg(test)]
#[path = "host_path_tests.rs"]
mod tests;
