//! The API objects a volume's content comes from ([`sources_of`]) and the payload built from
//! them once fetched ([`payload_of`]), for the configMap, secret, downwardAPI and projected
//! plugins. Optional sources that do not exist give nothing, as in the kubelet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::{
    ContentError, DEFAULT_MODE, NodeAllocatable, Payload,
    downward::project_items,
    key_to_path::{KeyedKind, project_keys},
    mode_bits,
    projected::project,
};

/// A service-account token a projected volume asks for, bound to its pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenSpec {
    pub namespace: String,
    pub service_account: String,
    /// Empty: the API server's default audiences.
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub pod_name: String,
    pub pod_uid: String,
}

/// One object to fetch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceObject {
    ConfigMap { namespace: String, name: String },
    Secret { namespace: String, name: String },
    Token(TokenSpec),
}

/// A fetched ConfigMap's `data` and `binaryData`, or a Secret's `data`, by key.
pub type FetchedObject = BTreeMap<String, Vec<u8>>;

/// What fetching one [`SourceObject`] gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    Object(FetchedObject),
    NotFound,
    Token(String),
    /// Another API failure, with its text.
    Failed(String),
}

/// The objects `volume` of `pod` needs, in the order the plugin reads them.
pub fn sources_of(pod: &Pod, volume: &Volume) -> Vec<SourceObject> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let config_map = |name: &str| SourceObject::ConfigMap {
        namespace: namespace.clone(),
        name: name.to_owned(),
    };
    let secret = |name: &str| SourceObject::Secret {
        namespace: namespace.clone(),
        name: name.to_owned(),
    };
    if let Some(source) = &volume.config_map {
        return vec![config_map(&source.name)];
    }
    if let Some(source) = &volume.secret {
        return vec![secret(source.secret_name.as_deref().unwrap_or_default())];
    }
    let Some(projected) = &volume.projected else {
        return Vec::new();
    };
    projected
        .sources
        .iter()
        .flatten()
        .filter_map(|source| {
            if let Some(cm) = &source.config_map {
                Some(config_map(&cm.name))
            } else if let Some(s) = &source.secret {
                Some(secret(&s.name))
            } else {
                source
                    .service_account_token
                    .as_ref()
                    .map(|token| SourceObject::Token(token_spec(pod, token)))
            }
        })
        .collect()
}

/// The TokenRequest a projection stands for (`expirationSeconds` defaults to 3600).
fn token_spec(
    pod: &Pod,
    token: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
) -> TokenSpec {
    let spec = pod.spec.as_ref();
    TokenSpec {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        service_account: spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
        audiences: token
            .audience
            .iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect(),
        expiration_seconds: token.expiration_seconds.unwrap_or(3600),
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The payload of `volume` from what was fetched for it.
pub fn payload_of(
    pod: &Pod,
    volume: &Volume,
    fetched: &BTreeMap<SourceObject, Fetched>,
    allocatable: &NodeAllocatable,
) -> Result<Payload, ContentError> {
    let missing = || ContentError::MissingSource(volume.name.clone());
    let mut payload = Payload::new();
    if let Some(source) = &volume.config_map {
        let object = object_or_error(pod, fetched, "configmap", &source.name, source.optional)?;
        project_keys(
            KeyedKind::ConfigMap,
            &object,
            source.items.as_deref(),
            mode_bits(source.default_mode, DEFAULT_MODE),
            source.optional.unwrap_or(false),
            &mut payload,
        )?;
    } else if let Some(source) = &volume.secret {
        let name = source.secret_name.as_deref().unwrap_or_default();
        let object = object_or_error(pod, fetched, "secret", name, source.optional)?;
        project_keys(
            KeyedKind::Secret,
            &object,
            source.items.as_deref(),
            mode_bits(source.default_mode, DEFAULT_MODE),
            source.optional.unwrap_or(false),
            &mut payload,
        )?;
    } else if let Some(source) = &volume.downward_api {
        let mode = mode_bits(source.default_mode, DEFAULT_MODE);
        let items = source.items.as_deref().unwrap_or_default();
        let errors = project_items(pod, items, mode, allocatable, &mut payload);
        if !errors.is_empty() {
            return Err(ContentError::Aggregate(errors));
        }
    } else if let Some(source) = &volume.projected {
        project(pod, source, fetched, allocatable, &mut payload)?;
    } else {
        return Err(missing());
    }
    Ok(payload)
}

/// The fetched ConfigMap or Secret `name` (`kind` as the kubelet names it in errors); an
/// optional one that does not exist is empty.
pub(super) fn object_or_error(
    pod: &Pod,
    fetched: &BTreeMap<SourceObject, Fetched>,
    kind: &'static str,
    name: &str,
    optional: Option<bool>,
) -> Result<FetchedObject, ContentError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let key = if kind == "configmap" {
        SourceObject::ConfigMap {
            namespace,
            name: name.to_owned(),
        }
    } else {
        SourceObject::Secret {
            namespace,
            name: name.to_owned(),
        }
    };
    match fetched.get(&key) {
        Some(Fetched::Object(object)) => Ok(object.clone()),
        Some(Fetched::NotFound) if optional.unwrap_or(false) => Ok(FetchedObject::new()),
        Some(Fetched::NotFound) | None => Err(ContentError::NotFound {
            kind,
            name: name.to_owned(),
        }),
        Some(Fetched::Failed(text)) => Err(ContentError::Api(text.clone())),
        Some(Fetched::Token(_)) => {
            Err(ContentError::Api(format!("{kind} {name:?}: not an object")))
        }
    }
}

#[cfg(test)]
#[path = "sources_tests.rs"]
mod tests;
