//! The ConfigMaps and Secrets one container start reads — its env references and the pod's
//! `imagePullSecrets` — fetched live through the volume manager's API port before the pure
//! rules run (the kubelet's `Get` strategy). The snapshot answers [`EnvSources`]; it never
//! calls the API itself, so the env rules stay synchronous. The service-link variables come from
//! the port's Service cache.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use nodepulse_actors::{
    config_source::is_static_pod,
    pods::{
        env::{EnvError, EnvSources, SourceError},
        service_env::service_env,
    },
    ports::ApiError,
    volume_manager::VolumeSourceApi,
};

type Data<T> = Result<Option<BTreeMap<String, T>>, SourceError>;

/// What the API said about each object a container's environment names.
#[derive(Debug, Default)]
pub struct EnvObjects {
    config_maps: BTreeMap<String, Data<String>>,
    secrets: BTreeMap<String, Data<Vec<u8>>>,
}

/// The names of the ConfigMaps and Secrets `container` reads (`envFrom`, `valueFrom`).
fn references(container: &Container) -> (Vec<String>, Vec<String>) {
    let (mut maps, mut secrets) = (Vec::new(), Vec::new());
    for from in container.env_from.iter().flatten() {
        maps.extend(from.config_map_ref.as_ref().map(|r| r.name.clone()));
        secrets.extend(from.secret_ref.as_ref().map(|r| r.name.clone()));
    }
    for variable in container.env.iter().flatten() {
        let Some(source) = &variable.value_from else {
            continue;
        };
        maps.extend(source.config_map_key_ref.as_ref().map(|r| r.name.clone()));
        secrets.extend(source.secret_key_ref.as_ref().map(|r| r.name.clone()));
    }
    maps.sort();
    maps.dedup();
    secrets.sort();
    secrets.dedup();
    (maps, secrets)
}

/// 404 is "does not exist"; any other failure is worth another sync.
fn found<T>(result: Result<T, ApiError>) -> Result<Option<T>, SourceError> {
    match result {
        Ok(object) => Ok(Some(object)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(error) => Err(SourceError(error.to_string())),
    }
}

impl EnvObjects {
    /// Reads every object `container` of `pod` names; without an API, each is unanswered.
    pub async fn fetch(
        api: Option<&Arc<dyn VolumeSourceApi>>,
        pod: &Pod,
        container: &Container,
    ) -> Self {
        let mut objects = Self::default();
        let Some(api) = api else {
            return objects;
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let (maps, secrets) = references(container);
        for name in maps {
            let data = found(api.get_config_map(namespace, &name).await)
                .map(|map| map.map(|map| map.data.unwrap_or_default()));
            objects.config_maps.insert(name, data);
        }
        for name in secrets {
            let data = found(api.get_secret(namespace, &name).await).map(|secret| {
                secret.map(|secret| {
                    let data = secret.data.unwrap_or_default();
                    data.into_iter()
                        .map(|(key, value)| (key, value.0))
                        .collect()
                })
            });
            objects.secrets.insert(name, data);
        }
        objects
    }
}

fn unanswered<T>(name: &str) -> Data<T> {
    Err(SourceError(format!(
        "object {name:?} could not be read: no API connection"
    )))
}

impl EnvSources for EnvObjects {
    fn config_map(&self, _: &str, name: &str) -> Data<String> {
        self.config_maps
            .get(name)
            .cloned()
            .unwrap_or_else(|| unanswered(name))
    }

    fn secret(&self, _: &str, name: &str) -> Data<Vec<u8>> {
        self.secrets
            .get(name)
            .cloned()
            .unwrap_or_else(|| unanswered(name))
    }
}

/// The pod's `imagePullSecrets` that exist; the kubelet skips (and logs) one it cannot read,
/// and the pull may still succeed without it.
pub async fn pull_secrets(api: Option<&Arc<dyn VolumeSourceApi>>, pod: &Pod) -> Vec<Secret> {
    let Some(api) = api else {
        return Vec::new();
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let names = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.image_pull_secrets.clone())
        .unwrap_or_default();
    let mut secrets = Vec::new();
    for reference in names {
        match api.get_secret(namespace, &reference.name).await {
            Ok(secret) => secrets.push(secret),
            Err(error) => tracing::warn!(
                %error, secret = %reference.name,
                "Unable to retrieve pull secret, the image pull may not succeed."
            ),
        }
    }
    secrets
}

/// The pod's service-link variables from the Services `api` watches (none without a lister, as
/// the kubelet without one). A pod from the API server may not start on a lister that never
/// listed; a static pod may (the kubelet exempts it: it runs before, and without, the API
/// server), with the Services known so far.
pub fn service_variables(
    api: Option<&Arc<dyn VolumeSourceApi>>,
    pod: &Pod,
) -> Result<BTreeMap<String, String>, EnvError> {
    let Some(lister) = api.and_then(|api| api.services()) else {
        return Ok(BTreeMap::new());
    };
    if !lister.has_synced() && !is_static_pod(pod) {
        return Err(EnvError::ServicesNotSynced);
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let links = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.enable_service_links)
        .unwrap_or(true);
    Ok(service_env(
        &lister.services_for(namespace),
        namespace,
        links,
    ))
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;
    use serde_json::json;

    use super::*;
    use nodepulse_actors::{
        ports::{ApiResult, ServiceLink, ServiceLister},
        volume_manager::content::{TokenSpec, token::IssuedToken},
    };

    /// A Service watch that has not listed yet (the API server is down).
    struct Unlisted;

    impl ServiceLister for Unlisted {
        fn has_synced(&self) -> bool {
            false
        }
        fn services_for(&self, _: &str) -> Vec<ServiceLink> {
            Vec::new()
        }
    }

    struct Api;

    impl VolumeSourceApi for Api {
        fn get_config_map(
            &self,
            _: &str,
            name: &str,
        ) -> BoxFuture<'static, ApiResult<k8s_openapi::api::core::v1::ConfigMap>> {
            let name = name.to_owned();
            Box::pin(async move { Err(ApiError::NotFound(name)) })
        }
        fn get_secret(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>> {
            let name = name.to_owned();
            Box::pin(async move { Err(ApiError::NotFound(name)) })
        }
        fn request_token(&self, _: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
            Box::pin(async { Err(ApiError::NotFound("token".to_owned())) })
        }
        fn services(&self) -> Option<Arc<dyn ServiceLister>> {
            Some(Arc::new(Unlisted))
        }
    }

    #[test]
    fn only_a_static_pod_starts_before_the_services_were_listed() {
        let api: Arc<dyn VolumeSourceApi> = Arc::new(Api);
        let pod = |annotations| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"namespace": "kube-system", "annotations": annotations}}),
            )
            .unwrap()
        };
        let from_api = pod(json!({}));
        let from_manifest = pod(json!({"kubernetes.io/config.source": "file"}));
        assert!(matches!(
            service_variables(Some(&api), &from_api),
            Err(EnvError::ServicesNotSynced)
        ));
        assert_eq!(
            service_variables(Some(&api), &from_manifest).ok(),
            Some(BTreeMap::new())
        );
    }
}
