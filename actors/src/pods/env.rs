//! A container's environment as the kubelet's `makeEnvironmentVariables` builds it: `envFrom`
//! in order (prefix, optional sources skipped), then `env` in order — `$(VAR)`-expanded values,
//! downward-API `fieldRef` and `resourceFieldRef`, ConfigMap and Secret keys, keys of files in
//! the pod's emptyDir volumes (`fileKeyRef`) — and `$(VAR)` in command and args, then the
//! service-link variables (`service_env`) for names still unset. Objects come through
//! [`EnvSources`], the Services' variables and the volumes' directories in the context; the
//! only I/O is reading a `fileKeyRef`'s file.

use std::{collections::BTreeMap, path::PathBuf};

use k8s_openapi::{
    api::core::v1::{Container, FileKeySelector, Pod},
    apimachinery::pkg::api::resource::Quantity,
};

pub use super::env_sources::{EnvSources, SourceError};
use super::{
    env_file::{EnvFileError, read_env_file},
    env_sources::{Kind, Objects},
    field_ref::field_value,
    resource_field::resource_field_value,
};
use crate::expansion::expand;
use crate::{ports::PodEvent, quantity::QuantityError};

/// The waiting reason of a container whose configuration cannot be built.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// Why the environment could not be built; the text is the kubelet's, shown as the waiting
/// message of [`CREATE_CONTAINER_CONFIG_ERROR`]. All clear up only when the pod's objects or
/// spec change (or, for `Source`, when the cache answers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("configmap {name:?} not found")]
    ConfigMapNotFound { name: String },
    #[error("secret {name:?} not found")]
    SecretNotFound { name: String },
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A `fieldRef` the kubelet cannot resolve (its conversion and extraction errors).
    #[error("{0}")]
    FieldPath(String),
    #[error("unsupported container resource : {0}")]
    UnsupportedResource(String),
    #[error("container {0} not found")]
    ContainerNotFound(String),
    /// A `fileKeyRef` to a volume the pod has not (yet) mounted.
    #[error("cannot find the volume {0:?} referenced by FileKeyRef")]
    FileKeyRefVolumeNotFound(String),
    /// The file is missing, unreadable or not in the format; the kubelet's message says no
    /// more (the reason is in the node's log).
    #[error("couldn't parse env file")]
    EnvFile(#[source] EnvFileError),
    /// A required key that is absent from the file, or empty there.
    #[error("environment variable key {key:?} not found in file {path:?}")]
    EnvFileKeyNotFound { key: String, path: String },
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    /// The Services were never listed: a pod from the API would miss `KUBERNETES_SERVICE_HOST`,
    /// which in-cluster clients read. Clears up once the watch has listed them.
    #[error("services have not yet been read at least once, cannot construct envvars")]
    ServicesNotSynced,
}

impl EnvError {
    /// The Warning the kubelet records when the container cannot be configured.
    pub fn event(&self) -> PodEvent {
        PodEvent {
            warning: true,
            reason: "Failed".to_owned(),
            message: format!("Error: {self}"),
            annotations: BTreeMap::new(),
        }
    }
}

/// What the downward API reads besides the pod itself.
#[derive(Debug, Clone, Copy)]
pub struct EnvContext<'a> {
    pub pod: &'a Pod,
    /// The sandbox's IPs, the node's preferred family first (the kubelet's `sortPodIPs`).
    pub pod_ips: &'a [String],
    /// The Node's IPs as `status.hostIPs` reports them.
    pub host_ips: &'a [String],
    /// The Node's allocatable: the limit `resourceFieldRef` reports when none is set.
    pub node_allocatable: &'a BTreeMap<String, Quantity>,
    /// The pod's service-link variables (`service_env`): `$(VAR)` sees them after the
    /// container's own, and they fill the names the container leaves unset.
    pub service_env: &'a BTreeMap<String, String>,
    /// The directories of the pod's mounted volumes by name, where `fileKeyRef` reads.
    pub volume_paths: &'a BTreeMap<String, PathBuf>,
}

/// The container's environment, sorted by name (the kubelet hands CRI a map's order).
pub fn container_env(
    context: &EnvContext<'_>,
    container: &Container,
    sources: &dyn EnvSources,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = context
        .pod
        .metadata
        .namespace
        .as_deref()
        .unwrap_or_default();
    let mut objects = Objects::new(namespace, sources);
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    // Every key is kept: the kubelet no longer skips keys that are not C identifiers (relaxed
    // environment variable names), so there is no InvalidEnvironmentVariableNames event.
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let reference = match (&from.config_map_ref, &from.secret_ref) {
            (Some(map), _) => Some((Kind::ConfigMap, &map.name, map.optional)),
            (None, Some(secret)) => Some((Kind::Secret, &secret.name, secret.optional)),
            (None, None) => None,
        };
        let Some((kind, name, optional)) = reference else {
            continue;
        };
        if let Some(data) = objects.data(kind, name, optional)? {
            env.extend(
                data.iter()
                    .map(|(key, value)| (format!("{prefix}{key}"), value.clone())),
            );
        }
    }
    for variable in container.env.iter().flatten() {
        let value = variable.value.as_deref().unwrap_or_default();
        let resolved = if !value.is_empty() {
            expand(value, |name| {
                (env.get(name))
                    .or_else(|| context.service_env.get(name))
                    .map(String::as_str)
            })
        } else if let Some(source) = &variable.value_from {
            let resolved = if let Some(field) = &source.field_ref {
                Some(field_value(context, field)?)
            } else if let Some(field) = &source.resource_field_ref {
                Some(resource_field_value(context, container, field)?)
            } else if let Some(selector) = &source.config_map_key_ref {
                objects.key(
                    Kind::ConfigMap,
                    &selector.name,
                    &selector.key,
                    selector.optional,
                )?
            } else if let Some(selector) = &source.secret_key_ref {
                objects.key(
                    Kind::Secret,
                    &selector.name,
                    &selector.key,
                    selector.optional,
                )?
            } else if let Some(selector) = &source.file_key_ref {
                file_key(context, selector)?
            } else {
                Some(String::new())
            };
            // An optional reference that resolves to nothing leaves the variable unset.
            let Some(resolved) = resolved else { continue };
            resolved
        } else {
            String::new()
        };
        env.insert(variable.name.clone(), resolved);
    }
    for (name, value) in context.service_env {
        env.entry(name.clone()).or_insert_with(|| value.clone());
    }
    Ok(env.into_iter().collect())
}

/// A `fileKeyRef`'s value, read now; `None` for an optional key the file lacks (a missing file
/// fails even an optional reference, as in the kubelet).
fn file_key(
    context: &EnvContext<'_>,
    selector: &FileKeySelector,
) -> Result<Option<String>, EnvError> {
    let volume = (context.volume_paths.get(&selector.volume_name))
        .ok_or_else(|| EnvError::FileKeyRefVolumeNotFound(selector.volume_name.clone()))?;
    let value = read_env_file(volume, &selector.path, &selector.key).map_err(|error| {
        tracing::warn!(%error, pod = ?context.pod.metadata.name, "failed to parse env file");
        EnvError::EnvFile(error)
    })?;
    match value.as_str() {
        // The kubelet does not tell an empty value from a missing key.
        "" if selector.optional == Some(true) => Ok(None),
        "" => Err(EnvError::EnvFileKeyNotFound {
            key: selector.key.clone(),
            path: volume.join(&selector.path).display().to_string(),
        }),
        _ => Ok(Some(value)),
    }
}

/// Command and args with `$(VAR)` expanded against the final environment.
pub fn expand_command_and_args(
    container: &Container,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let variables: BTreeMap<&str, &str> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let expand_all = |items: &Option<Vec<String>>| {
        items
            .iter()
            .flatten()
            .map(|item| expand(item, |name| variables.get(name).copied()))
            .collect()
    };
    (expand_all(&container.command), expand_all(&container.args))
}

/// Secret bytes as text (Go's `string(bytes)`; invalid UTF-8 becomes U+FFFD here).
pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
