//! The atomic writer's payload paths (§1.10 step 1): the kubelet's checks, in its order and
//! with its texts, then Go's `filepath.Clean`. Pure string work; nothing here touches the disk.

use super::atomic_writer::Payload;

/// Longest file name and path the writer accepts.
const MAX_FILE_NAME_LENGTH: usize = 255;
const MAX_PATH_LENGTH: usize = 4096;

/// A payload path the kubelet would refuse. Retrying never helps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPath {
    #[error("invalid path: must not be empty: {0:?}")]
    EmptyPath(String),
    #[error("invalid path: must be relative path: {0}")]
    AbsolutePath(String),
    #[error("invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters")]
    PathTooLong,
    #[error("invalid path: must not contain '..': {0}")]
    ContainsDotDot(String),
    #[error(
        "invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
    )]
    FileNameTooLong,
    #[error("invalid path: must not start with '..': {0}")]
    StartsWithDotDot(String),
}

/// The kubelet's path checks, in its order, then `filepath.Clean`.
pub fn clean_payload(payload: &Payload) -> Result<Payload, InvalidPath> {
    let mut clean = Payload::new();
    for (path, file) in payload {
        validate_path(path)?;
        clean.insert(clean_path(path), file.clone());
    }
    Ok(clean)
}

fn validate_path(path: &str) -> Result<(), InvalidPath> {
    if path.is_empty() {
        return Err(InvalidPath::EmptyPath(path.to_owned()));
    }
    if path.starts_with('/') {
        return Err(InvalidPath::AbsolutePath(path.to_owned()));
    }
    if path.len() > MAX_PATH_LENGTH {
        return Err(InvalidPath::PathTooLong);
    }
    let items: Vec<&str> = path.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(InvalidPath::ContainsDotDot(path.to_owned()));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(InvalidPath::FileNameTooLong);
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(InvalidPath::StartsWithDotDot(path.to_owned()));
    }
    Ok(())
}

/// `a//b/./c/` → `a/b/c` (no `..` remains after validation).
fn clean_path(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    parts.join("/")
}
