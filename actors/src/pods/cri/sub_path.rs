//! A container's `subPath` mounts, prepared as the kubelet's `makeMounts` does before the
//! container is created: the path must stay inside its volume (relative, no `..`, and no
//! symlink leading out of it), and a missing directory is made (0755). A bad one fails the
//! start with `CreateContainerConfigError`, as in the kubelet, instead of mounting a host path.
//! Not done: the kubelet's bind mount of an opened file descriptor, which also closes the race
//! of a symlink swapped in between this check and the runtime's mount.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Component, Path, PathBuf},
};

use k8s_openapi::api::core::v1::Container;

/// A `subPath` that cannot be mounted. Only a changed spec or volume fixes it; the start is
/// tried again after the usual back-off.
#[derive(Debug, thiserror::Error)]
#[error("failed to prepare subPath for volumeMount {mount:?} of container {container:?}: {why}")]
pub struct SubPathError {
    pub mount: String,
    pub container: String,
    #[source]
    pub why: Unusable,
}

/// Why the path is refused.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("subpath {0:?} must be a relative path without '..'")]
    NotRelative(String),
    #[error("cannot resolve volume path {}: {source}", .path.display())]
    Volume {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot resolve subpath {}: {source}", .path.display())]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("subpath {} is outside of the volume {}", .path.display(), .volume.display())]
    Outside { path: PathBuf, volume: PathBuf },
    #[error("cannot create subpath {}: {source}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks (and makes) every `subPath` of `container` whose volume is set up at `host_paths`.
pub fn prepare(
    container: &Container,
    host_paths: &BTreeMap<String, PathBuf>,
) -> Result<(), SubPathError> {
    for mount in container.volume_mounts.iter().flatten() {
        let Some(sub) = mount.sub_path.as_deref().filter(|sub| !sub.is_empty()) else {
            continue;
        };
        let Some(volume) = host_paths.get(&mount.name) else {
            continue;
        };
        let failed = |why| SubPathError {
            mount: mount.name.clone(),
            container: container.name.clone(),
            why,
        };
        inside(volume, sub).map_err(failed)?;
    }
    Ok(())
}

/// Walks `sub` from the volume's root one name at a time: an existing step is resolved
/// (symlinks followed) and must stay within the volume; a missing one is made there with the
/// root's mode, setgid and sticky bits included, set past the umask (the kubelet's
/// `SafeMakeDir`: an fsGroup volume's subPath stays group-writable). So nothing is ever made
/// outside the volume, even through a symlink.
fn inside(volume: &Path, sub: &str) -> Result<(), Unusable> {
    let relative = Path::new(sub);
    if relative.is_absolute()
        || relative
            .components()
            .any(|part| matches!(part, Component::ParentDir))
    {
        return Err(Unusable::NotRelative(sub.to_owned()));
    }
    let root = fs::canonicalize(volume).map_err(|source| Unusable::Volume {
        path: volume.to_owned(),
        source,
    })?;
    let root_mode = fs::metadata(&root)
        .map_err(|source| Unusable::Volume {
            path: volume.to_owned(),
            source,
        })?
        .permissions()
        .mode()
        & 0o7777;
    let mut current = root.clone();
    for part in relative.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        let next = current.join(name);
        if fs::symlink_metadata(&next).is_ok() {
            let resolved = fs::canonicalize(&next).map_err(|source| Unusable::Resolve {
                path: next.clone(),
                source,
            })?;
            if !resolved.starts_with(&root) {
                return Err(Unusable::Outside {
                    path: resolved,
                    volume: root,
                });
            }
            current = resolved;
        } else {
            let create = |source| Unusable::Create {
                path: next.clone(),
                source,
            };
            fs::DirBuilder::new()
                .mode(root_mode)
                .create(&next)
                .map_err(create)?;
            // Through a descriptor that refuses a link, as the kubelet's fchmod: the pod may
            // swap the new directory for one meanwhile.
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
                .open(&next)
                .and_then(|dir| dir.set_permissions(fs::Permissions::from_mode(root_mode)))
                .map_err(create)?;
            current = next;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(sub: &str) -> Container {
        serde_json::from_value(serde_json::json!({
            "name": "app",
            "volumeMounts": [{"name": "data", "mountPath": "/data", "subPath": sub}],
        }))
        .expect("a container")
    }

    #[test]
    fn a_sub_path_inside_the_volume_is_made_and_accepted() {
        let volume = tempfile::tempdir().expect("tempdir");
        let paths = BTreeMap::from([("data".to_owned(), volume.path().to_owned())]);
        prepare(&container("logs/app"), &paths).expect("inside");
        assert!(volume.path().join("logs/app").is_dir());
    }

    #[test]
    fn escapes_by_dots_absolute_paths_or_symlinks_are_refused() {
        let volume = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), volume.path().join("out")).expect("symlink");
        let paths = BTreeMap::from([("data".to_owned(), volume.path().to_owned())]);
        for sub in ["../etc", "/etc", "a/../../etc", "out", "out/deeper"] {
            let error = prepare(&container(sub), &paths).expect_err(sub).to_string();
            assert!(
                error.starts_with(
                    "failed to prepare subPath for volumeMount \"data\" of container \"app\": "
                ),
                "{sub}: {error}"
            );
        }
        let error = prepare(&container("/etc"), &paths).expect_err("absolute");
        assert_eq!(
            error.to_string(),
            "failed to prepare subPath for volumeMount \"data\" of container \"app\": \
             subpath \"/etc\" must be a relative path without '..'"
        );
        assert!(matches!(error.why, Unusable::NotRelative(_)));
        assert!(
            !outside.path().join("deeper").exists(),
            "nothing is made outside the volume"
        );
    }

    #[test]
    fn a_made_sub_path_takes_the_volumes_mode_with_its_setgid_and_sticky_bits() {
        let volume = tempfile::tempdir().expect("tempdir");
        fs::set_permissions(volume.path(), fs::Permissions::from_mode(0o3777)).expect("chmod");
        let paths = BTreeMap::from([("data".to_owned(), volume.path().to_owned())]);
        prepare(&container("a/b"), &paths).expect("made");
        for dir in ["a", "a/b"] {
            let mode = fs::metadata(volume.path().join(dir))
                .expect("made")
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, 0o3777, "{dir}: {mode:o}");
        }
    }
}
