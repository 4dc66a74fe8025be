//! `volumeMounts[].recursiveReadOnly`, as the kubelet's `resolveRecursiveReadOnly` in
//! `makeMounts`: `Disabled` (or unset) is a plain mount; `IfPossible` is recursive where the
//! runtime's handler can; `Enabled` must be, or the container is not created
//! (CreateContainerConfigError with the kubelet's message). Only a read-only mount without
//! propagation may ask.

use k8s_openapi::api::core::v1::{Container, VolumeMount};
use nodepulse_actors::ports::Mount;

/// Why a mount cannot be had as it asks (the kubelet's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecursiveReadOnlyError {
    #[error("volume {0:?} requested recursive read-only mode, but it is not read-only")]
    NotReadOnly(String),
    #[error(
        "volume {volume:?} requested recursive read-only mode, but it is not compatible with propagation {propagation:?}"
    )]
    Propagation { volume: String, propagation: String },
    #[error(
        "volume {0:?} requested recursive read-only mode, but it is not supported by the runtime"
    )]
    Unsupported(String),
    #[error("unknown recursive read-only mode {0:?}")]
    UnknownMode(String),
}

/// A container whose mounts cannot be made: CreateContainerConfigError with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to resolve recursive read-only mode: {0}")]
pub struct ResolveError(#[source] pub RecursiveReadOnlyError);

/// The kubelet's `resolveRecursiveReadOnly`: whether `mount` is made recursively read-only
/// on a handler that can (`supported`) or cannot.
pub fn resolve(mount: &VolumeMount, supported: bool) -> Result<bool, RecursiveReadOnlyError> {
    let mode = match mount.recursive_read_only.as_deref() {
        None | Some("Disabled") => return Ok(false),
        Some(mode) => mode,
    };
    let name = &mount.name;
    if !mount.read_only.unwrap_or(false) {
        return Err(RecursiveReadOnlyError::NotReadOnly(name.clone()));
    }
    if let Some(propagation) = mount.mount_propagation.as_deref().filter(|p| *p != "None") {
        return Err(RecursiveReadOnlyError::Propagation {
            volume: name.clone(),
            propagation: propagation.to_owned(),
        });
    }
    match mode {
        "IfPossible" => Ok(supported),
        "Enabled" if supported => Ok(true),
        "Enabled" => Err(RecursiveReadOnlyError::Unsupported(name.clone())),
        other => Err(RecursiveReadOnlyError::UnknownMode(other.to_owned())),
    }
}

/// Marks the mounts of `container`'s entries that resolve to recursive (mount paths are
/// unique within a container), or the kubelet's error for the first that cannot be had.
pub fn apply(
    container: &Container,
    supported: bool,
    mounts: &mut [Mount],
) -> Result<(), ResolveError> {
    for entry in container.volume_mounts.iter().flatten() {
        let recursive = resolve(entry, supported).map_err(ResolveError)?;
        if !recursive {
            continue;
        }
        for mount in mounts
            .iter_mut()
            .filter(|mount| mount.container_path.as_os_str() == entry.mount_path.as_str())
        {
            mount.recursive_read_only = true;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mount(spec: serde_json::Value) -> VolumeMount {
        let mut base = json!({"name": "data", "mountPath": "/data"});
        for (key, value) in spec.as_object().unwrap() {
            base[key] = value.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn each_mode_resolves_as_the_kubelets_table() {
        let read_only = |mode: &str| json!({"readOnly": true, "recursiveReadOnly": mode});
        let cases = [
            (json!({}), true, Ok(false)),
            (read_only("Disabled"), true, Ok(false)),
            (read_only("IfPossible"), true, Ok(true)),
            (read_only("IfPossible"), false, Ok(false)),
            (read_only("Enabled"), true, Ok(true)),
            (
                read_only("Enabled"),
                false,
                Err(
                    "volume \"data\" requested recursive read-only mode, but it is not supported by the runtime",
                ),
            ),
            (
                json!({"recursiveReadOnly": "Enabled"}),
                true,
                Err("volume \"data\" requested recursive read-only mode, but it is not read-only"),
            ),
            (
                json!({"readOnly": true, "recursiveReadOnly": "Enabled", "mountPropagation": "HostToContainer"}),
                true,
                Err(
                    "volume \"data\" requested recursive read-only mode, but it is not compatible with propagation \"HostToContainer\"",
                ),
            ),
            (
                read_only("Sometimes"),
                true,
                Err("unknown recursive read-only mode \"Sometimes\""),
            ),
        ];
        for (spec, supported, expected) in cases {
            let got = resolve(&mount(spec.clone()), supported).map_err(|error| error.to_string());
            assert_eq!(
                got,
                expected.map_err(str::to_owned),
                "{spec} on {supported}"
            );
        }
    }

    #[test]
    fn only_the_mount_of_a_recursive_entry_is_marked() {
        let container: Container = serde_json::from_value(json!({"name": "app", "volumeMounts": [
            {"name": "data", "mountPath": "/data", "readOnly": true, "recursiveReadOnly": "IfPossible"},
            {"name": "logs", "mountPath": "/logs", "readOnly": true},
        ]}))
        .unwrap();
        let mut mounts = vec![
            Mount {
                container_path: "/data".into(),
                readonly: true,
                ..Mount::default()
            },
            Mount {
                container_path: "/logs".into(),
                readonly: true,
                ..Mount::default()
            },
        ];
        apply(&container, true, &mut mounts).unwrap();
        assert_eq!(
            mounts
                .iter()
                .map(|m| m.recursive_read_only)
                .collect::<Vec<_>>(),
            [true, false]
        );
    }
}
