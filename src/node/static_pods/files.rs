//! Reading `staticPodPath` as the kubelet's file source does (`kl/config/file.go`): a
//! directory's regular files in name order, not recursing, dotfiles skipped, or one file; a
//! missing path is an empty set; a bad manifest is logged and skipped, the others load; a
//! second pod of the same full name is dropped. And a cheap fingerprint of the path, so a
//! change is read within a poll instead of waiting for the next full read.

use std::{
    collections::BTreeSet,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::Pod;

use super::manifest::{MAX_MANIFEST_BYTES, static_pod};

/// The path cannot be read at all; nothing is known of its pods. Retried on the next read.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("{path}: path is not a directory or file")]
    NotDirectoryOrFile { path: String },
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The pods of `path` for `node`, in the order of their files.
pub fn read_static_pods(path: &Path, node: &str) -> Result<Vec<Pod>, PathError> {
    let read_error = |source| PathError::Read {
        path: path.display().to_string(),
        source,
    };
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(path = %path.display(), "path does not exist, ignoring");
            return Ok(Vec::new());
        }
        Err(error) => return Err(read_error(error)),
    };
    let files = if metadata.is_dir() {
        manifest_files(path).map_err(read_error)?
    } else if metadata.is_file() {
        vec![path.to_owned()]
    } else {
        return Err(PathError::NotDirectoryOrFile {
            path: path.display().to_string(),
        });
    };
    let pods = files
        .iter()
        .filter_map(|file| read_file(file, node).map(|pod| (pod, file.display().to_string())));
    Ok(first_of_each_name(pods, "file"))
}

/// The pods of one read of `source` (each with where it came from), a second pod of a full
/// name dropped with the kubelet's words (`filterInvalidPods`).
pub fn first_of_each_name(pods: impl IntoIterator<Item = (Pod, String)>, source: &str) -> Vec<Pod> {
    let mut names = BTreeSet::new();
    let mut kept = Vec::new();
    for (pod, from) in pods {
        let full_name = full_name(&pod);
        if names.insert(full_name.clone()) {
            kept.push(pod);
        } else {
            tracing::warn!(
                from,
                "Error validating pod {full_name} from {source} due to duplicate pod name {:?}, ignoring",
                pod.metadata.name.as_deref().unwrap_or_default()
            );
        }
    }
    kept
}

/// `<namespace>/<name>`: one pod of each per source.
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The directory's entries the kubelet reads (`[^.]*`), sorted; subdirectories are logged.
fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        match fs::metadata(&path) {
            Ok(metadata) if metadata.is_dir() => tracing::warn!(
                path = %path.display(),
                "Provided manifest path is a directory, not recursing into manifest path"
            ),
            Ok(metadata) if metadata.is_file() => files.push(path),
            Ok(_) => {
                tracing::warn!(path = %path.display(), "Manifest path is not a directory or file")
            }
            // Removed since listed: it is simply not there.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!(path = %path.display(), %error, "Could not get metadata"),
        }
    }
    files.sort();
    Ok(files)
}

fn read_file(file: &Path, node: &str) -> Option<Pod> {
    let data = match read_at_most(file) {
        Ok(data) => data,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(path = %file.display(), %error, "Could not process manifest file");
            return None;
        }
    };
    match static_pod(&data, file, node) {
        Ok(pod) => Some(pod),
        Err(error) => {
            tracing::warn!(path = %file.display(), %error, "Could not process manifest file");
            None
        }
    }
}

/// The file, or its first bytes past the limit (which the parser then refuses).
fn read_at_most(file: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut data = Vec::new();
    fs::File::open(file)?
        .take(MAX_MANIFEST_BYTES as u64 + 1)
        .read_to_end(&mut data)?;
    Ok(data)
}

/// What changes when a manifest is added, removed, replaced or written: each entry's name,
/// inode, size and modification time (the path's own for a file or a missing path).
pub fn fingerprint(path: &Path) -> Vec<(String, u64, u64, i64, i64)> {
    let stamp = |name: String, metadata: &fs::Metadata| {
        (
            name,
            metadata.ino(),
            metadata.size(),
            metadata.mtime(),
            metadata.mtime_nsec(),
        )
    };
    let Ok(metadata) = fs::metadata(path) else {
        return Vec::new();
    };
    let mut stamps = vec![stamp(String::new(), &metadata)];
    if metadata.is_dir()
        && let Ok(entries) = fs::read_dir(path)
    {
        for entry in entries.flatten() {
            if let Ok(metadata) = fs::metadata(entry.path()) {
                stamps.push(stamp(
                    entry.file_name().to_string_lossy().into_owned(),
                    &metadata,
                ));
            }
        }
    }
    stamps.sort();
    stamps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> String {
        format!(
            "{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"{name}\"}},
              \"spec\": {{\"containers\": [{{\"name\": \"app\", \"image\": \"busybox\"}}]}}}}"
        )
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter()
            .map(|pod| pod.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn a_directory_gives_its_files_pods_in_name_order_skipping_dotfiles_subdirectories_and_bad_ones()
     {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).expect("write");
        write("b.json", &manifest("web"));
        write("a.yaml", &manifest("db"));
        write(".c.yaml.swp", &manifest("editor"));
        write("broken.yaml", "kind: [");
        write("z-duplicate.yaml", &manifest("db"));
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub/x.yaml"), manifest("nested")).expect("write");
        let pods = read_static_pods(dir.path(), "n1").expect("read");
        assert_eq!(names(&pods), ["db-n1", "web-n1"]);

        let one = read_static_pods(&dir.path().join("b.json"), "n1").expect("read");
        assert_eq!(names(&one), ["web-n1"], "one file");
        let missing = read_static_pods(&dir.path().join("none"), "n1").expect("read");
        assert!(missing.is_empty(), "a missing path is an empty set");
    }

    #[test]
    fn the_fingerprint_changes_when_a_manifest_is_written_added_or_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("a.yaml");
        fs::write(&file, manifest("a")).expect("write");
        let first = fingerprint(dir.path());
        assert_eq!(fingerprint(dir.path()), first);
        fs::write(&file, manifest("a-longer-name")).expect("write");
        let written = fingerprint(dir.path());
        assert_ne!(written, first);
        fs::write(dir.path().join("b.yaml"), manifest("b")).expect("write");
        let added = fingerprint(dir.path());
        assert_ne!(added, written);
        fs::remove_file(&file).expect("remove");
        assert_ne!(fingerprint(dir.path()), added);
    }
}
