//! [`VolumeSourceApi`] over kube-rs: ConfigMaps and Secrets from one watch each (the kubelet's
//! default `Watch` change-detection strategy, [`super::object_watches`]) and TokenRequests
//! posted through the rate-limited main client (the kubelet's managers use its main client
//! too), each call bounded by the heartbeat timeout.

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::{ConfigMap, Secret, ServiceAccount},
};
use kube::api::{Api, PostParams};
use nodepulse_actors::{
    ports::{ApiError, ApiResult, RuntimeClassLister, ServiceLister},
    volume_manager::VolumeSourceApi,
    volume_manager::content::{TokenSpec, token::IssuedToken},
};

use super::{
    KubeApi,
    object_watches::{ObjectWatches, Watched},
    runtime_classes::RuntimeClassCache,
    services::ServiceCache,
    timed,
};
use std::sync::Arc;

/// The TokenRequest the kubelet posts for a projected token: the spec's audiences and
/// expiration, bound to the pod.
pub fn token_request(spec: &TokenSpec) -> TokenRequest {
    TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: (!spec.audiences.is_empty()).then(|| spec.audiences.clone()),
            expiration_seconds: Some(spec.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: Some(spec.pod_name.clone()),
                uid: Some(spec.pod_uid.clone()),
            }),
        }),
        ..TokenRequest::default()
    }
}

impl KubeApi {
    fn config_map_watches(&self) -> Arc<ObjectWatches<ConfigMap>> {
        Arc::clone(
            self.config_maps
                .get_or_init(|| Arc::new(self.object_watches())),
        )
    }

    fn secret_watches(&self) -> Arc<ObjectWatches<Secret>> {
        Arc::clone(self.secrets.get_or_init(|| Arc::new(self.object_watches())))
    }

    /// Watches on the main client (a watch takes no turn of its rate limit), a first list
    /// bounded as a `GET` is.
    fn object_watches<K: Watched>(&self) -> ObjectWatches<K> {
        ObjectWatches::new(
            self.main.clone(),
            self.reachability.recovery(),
            &self.runtime,
            self.sync_period,
            self.heartbeat_timeout,
        )
    }
}

impl VolumeSourceApi for KubeApi {
    fn services(&self) -> Option<std::sync::Arc<dyn ServiceLister>> {
        let cache = self.services.get_or_init(|| {
            std::sync::Arc::new(ServiceCache::start(
                self.main.clone(),
                self.reachability.recovery(),
                &self.runtime,
            ))
        });
        Some(std::sync::Arc::clone(cache) as std::sync::Arc<dyn ServiceLister>)
    }

    fn runtime_classes(&self) -> Option<std::sync::Arc<dyn RuntimeClassLister>> {
        let cache = self.runtime_classes.get_or_init(|| {
            std::sync::Arc::new(RuntimeClassCache::start(
                self.main.clone(),
                self.reachability.recovery(),
                &self.runtime,
            ))
        });
        Some(std::sync::Arc::clone(cache) as std::sync::Arc<dyn RuntimeClassLister>)
    }

    fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<ConfigMap>> {
        let watches = self.config_map_watches();
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        Box::pin(async move { watches.get(&namespace, &name).await })
    }

    fn get_secret(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>> {
        let watches = self.secret_watches();
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        Box::pin(async move { watches.get(&namespace, &name).await })
    }

    fn request_token(&self, spec: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        let (main, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (request, spec) = (token_request(spec), spec.clone());
        Box::pin(async move {
            let api = Api::<ServiceAccount>::namespaced(main.await, &spec.namespace);
            let issued_at = Timestamp::now();
            let answer: TokenRequest = timed(
                timeout,
                api.create_subresource(
                    "token",
                    &spec.service_account,
                    &PostParams::default(),
                    &request,
                ),
            )
            .await?;
            let incomplete =
                || ApiError::Incomplete("a TokenRequest answer without a token".to_owned());
            let status = answer.status.ok_or_else(incomplete)?;
            Ok(IssuedToken {
                token: status.token.ok_or_else(incomplete)?,
                issued_at,
                expires_at: status.expiration_timestamp.ok_or_else(incomplete)?.0,
            })
        })
    }
}
