//! What each of a container's `volumeMounts` mounts, as the kubelet's `makeMounts` prepares it
//! before the container is created: the volume itself, or its `subPath` (`subPathExpr`
//! expanded with the container's environment first), relative and without `..`, made when
//! missing and bound under the pod's directory by the [`SubPathHost`]. The runtime mounts that
//! bind, never `volume/subPath`, which a container sharing the volume could turn into a link
//! out of it in between (CVE-2017-1002101). An image volume's mount is its image, its
//! subPath (same expansion and form checks) a path inside the image for the runtime to
//! resolve. A failure is `CreateContainerConfigError`.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use k8s_openapi::api::core::v1::{Container, VolumeMount};

use nodepulse_actors::{
    expansion::expand,
    ports::ImageMount,
    volume_manager::{SubPathHost, SubPathHostError, SubPathMount},
};

/// What one `volumeMounts` entry mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountSource {
    /// A host path: the volume's, or the bind of its subPath.
    Host(PathBuf),
    /// An image volume's image, with the entry's subPath as the path inside it.
    Image(ImageMount),
}

/// Why a container's mounts cannot be prepared; the text is the kubelet's. Only a changed
/// spec, environment or volume fixes it; the start is tried again after the usual back-off.
#[derive(Debug, thiserror::Error)]
pub enum SubPathError {
    /// `subPathExpr` names variables the container does not have, or has empty.
    #[error("missing value for {0}")]
    MissingValue(String),
    #[error("error SubPath `{0}` must not be an absolute path")]
    Absolute(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    Backsteps(String),
    /// The host's reason stays in the node's log: it may show the host's paths.
    #[error(
        "failed to create subPath directory for volumeMount {mount:?} of container {container:?}"
    )]
    Create {
        mount: String,
        container: String,
        #[source]
        why: SubPathHostError,
    },
    #[error("failed to prepare subPath for volumeMount {mount:?} of container {container:?}")]
    Prepare {
        mount: String,
        container: String,
        #[source]
        why: SubPathHostError,
    },
}

/// The subPath of `mount`, `None` for the whole volume: `subPathExpr` expanded against `env`
/// (the kubelet's `ExpandContainerVolumeMounts`: a variable unset or empty is an error), else
/// `subPath`; then refused if absolute or with a `..` element.
pub fn sub_path_of(
    mount: &VolumeMount,
    env: &[(String, String)],
) -> Result<Option<String>, SubPathError> {
    let sub = match mount
        .sub_path_expr
        .as_deref()
        .filter(|expr| !expr.is_empty())
    {
        Some(expr) => expand_strictly(expr, env)?,
        None => mount.sub_path.clone().unwrap_or_default(),
    };
    if sub.is_empty() {
        return Ok(None);
    }
    if sub.starts_with('/') {
        return Err(SubPathError::Absolute(sub));
    }
    if sub.split('/').any(|part| part == "..") {
        return Err(SubPathError::Backsteps(sub));
    }
    Ok(Some(sub))
}

/// `$(VAR)` expanded as everywhere else, except that every name without a non-empty value
/// is collected and reported, in order, instead of being left as written.
fn expand_strictly(expr: &str, env: &[(String, String)]) -> Result<String, SubPathError> {
    let values: BTreeMap<&str, &str> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let missing = RefCell::new(BTreeSet::new());
    let expanded = expand(expr, |name| match values.get(name) {
        Some(value) if !value.is_empty() => Some(value),
        _ => {
            missing.borrow_mut().insert(name.to_owned());
            Some("")
        }
    });
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(SubPathError::MissingValue(
            missing.into_iter().collect::<Vec<_>>().join(", "),
        ))
    }
}

/// What each of `container`'s `volumeMounts` mounts, by its index: an image volume's image
/// (`images`, by volume name, present), else the volume's host path (`host_paths`, by volume
/// name) or its subPath's bind. Entries whose volume is not set up are left out, for the
/// volume manager to report.
pub fn mount_sources(
    host: Option<&dyn SubPathHost>,
    pod_uid: &str,
    container: &Container,
    host_paths: &BTreeMap<String, PathBuf>,
    images: &BTreeMap<String, ImageMount>,
    env: &[(String, String)],
) -> Result<BTreeMap<usize, MountSource>, SubPathError> {
    let mut sources = BTreeMap::new();
    for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
        if let Some(image) = images.get(&mount.name) {
            let image = ImageMount {
                sub_path: sub_path_of(mount, env)?.unwrap_or_default(),
                ..image.clone()
            };
            sources.insert(index, MountSource::Image(image));
            continue;
        }
        let Some(volume) = host_paths.get(&mount.name) else {
            continue;
        };
        let Some(sub_path) = sub_path_of(mount, env)? else {
            sources.insert(index, MountSource::Host(volume.clone()));
            continue;
        };
        let request = SubPathMount {
            pod_uid,
            volume_name: &mount.name,
            volume_path: volume,
            sub_path: &sub_path,
            container_name: &container.name,
            mount_index: index,
        };
        let failed = |why: SubPathHostError, create: bool| {
            tracing::warn!(pod_uid, container = %container.name, volume_mount = %mount.name, %why, "cannot prepare a subPath");
            let (mount, container) = (mount.name.clone(), container.name.clone());
            if create {
                SubPathError::Create {
                    mount,
                    container,
                    why,
                }
            } else {
                SubPathError::Prepare {
                    mount,
                    container,
                    why,
                }
            }
        };
        let Some(host) = host else {
            let why = SubPathHostError("this node binds no subPath".to_owned());
            return Err(failed(why, false));
        };
        host.make_missing_dirs(&request)
            .map_err(|why| failed(why, true))?;
        let bound = host.bind(&request).map_err(|why| failed(why, false))?;
        sources.insert(index, MountSource::Host(bound));
    }
    Ok(sources)
}

#[cfg(test)]
#[path = "sub_path_tests.rs"]
mod tests;
