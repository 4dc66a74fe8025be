//! Where a container's environment reads ConfigMaps and Secrets: the [`EnvSources`] port the
//! engine backs with its cache, and the per-build memo that fetches each object once, as the
//! kubelet's `makeEnvironmentVariables` keeps its local maps.

use std::collections::BTreeMap;

use super::env::{EnvError, text};

/// ConfigMaps and Secrets by namespace and name, as the engine's cache holds them.
pub trait EnvSources {
    /// A ConfigMap's `data`; `Ok(None)` when it does not exist.
    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, SourceError>;
    /// A Secret's `data`; `Ok(None)` when it does not exist.
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, SourceError>;
}

/// The cache could not answer (not synced, API unreachable): worth retrying on the next sync.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// The two kinds of object an environment reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    fn not_found(self, name: &str) -> EnvError {
        let name = name.to_owned();
        match self {
            Self::ConfigMap => EnvError::ConfigMapNotFound { name },
            Self::Secret => EnvError::SecretNotFound { name },
        }
    }

    fn key_not_found(self, key: &str, namespace: &str, name: &str) -> EnvError {
        let (key, namespace, name) = (key.to_owned(), namespace.to_owned(), name.to_owned());
        match self {
            Self::ConfigMap => EnvError::ConfigMapKeyNotFound {
                key,
                namespace,
                name,
            },
            Self::Secret => EnvError::SecretKeyNotFound {
                key,
                namespace,
                name,
            },
        }
    }
}

/// The objects one environment reads, each fetched once (the kubelet's per-call maps), Secret
/// values already as text. A missing optional object is not remembered, so a later required
/// reference to it still fails.
pub(super) struct Objects<'a> {
    namespace: &'a str,
    sources: &'a dyn EnvSources,
    fetched: BTreeMap<(Kind, String), BTreeMap<String, String>>,
}

impl<'a> Objects<'a> {
    pub(super) fn new(namespace: &'a str, sources: &'a dyn EnvSources) -> Self {
        Self {
            namespace,
            sources,
            fetched: BTreeMap::new(),
        }
    }

    /// The object's data; `None` when it is missing and `optional`.
    pub(super) fn data(
        &mut self,
        kind: Kind,
        name: &str,
        optional: Option<bool>,
    ) -> Result<Option<&BTreeMap<String, String>>, EnvError> {
        let entry = (kind, name.to_owned());
        if !self.fetched.contains_key(&entry) {
            let data = match kind {
                Kind::ConfigMap => self.sources.config_map(self.namespace, name)?,
                Kind::Secret => self.sources.secret(self.namespace, name)?.map(|data| {
                    data.into_iter()
                        .map(|(key, value)| (key, text(&value)))
                        .collect()
                }),
            };
            match data {
                Some(data) => self.fetched.insert(entry.clone(), data),
                None if optional == Some(true) => return Ok(None),
                None => return Err(kind.not_found(name)),
            };
        }
        Ok(self.fetched.get(&entry))
    }

    /// One key of the object; `None` when the object or the key is missing and `optional`.
    pub(super) fn key(
        &mut self,
        kind: Kind,
        name: &str,
        key: &str,
        optional: Option<bool>,
    ) -> Result<Option<String>, EnvError> {
        let namespace = self.namespace;
        let Some(data) = self.data(kind, name, optional)? else {
            return Ok(None);
        };
        match data.get(key) {
            Some(value) => Ok(Some(value.clone())),
            None if optional == Some(true) => Ok(None),
            None => Err(kind.key_not_found(key, namespace, name)),
        }
    }
}
