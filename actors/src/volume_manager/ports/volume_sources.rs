//! The API objects API-backed volumes are built from, as the volume manager reaches them:
//! ConfigMaps and Secrets as the adapter has them (kube's adapter answers from a watch of each
//! object, the kubelet's default `Watch` strategy) and service-account tokens from the
//! TokenRequest API, bound to the pod.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::ports::ApiResult;
use crate::volume_manager::content::{TokenSpec, token::IssuedToken};

pub trait VolumeSourceApi: Send + Sync + 'static {
    fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<ConfigMap>>;
    fn get_secret(&self, namespace: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>>;
    /// `POST serviceaccounts/{sa}/token` with the spec's audiences, expiration and the pod as
    /// bound object.
    fn request_token(&self, spec: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>>;
    /// The cluster's Services for the service-link variables, watched from the first call on;
    /// `None` where there are none to be had (a node without an API server sets none, as the
    /// kubelet without a service lister).
    fn services(&self) -> Option<std::sync::Arc<dyn crate::ports::ServiceLister>> {
        None
    }
    /// The cluster's RuntimeClasses, watched from the first call on; `None` without an API
    /// server.
    fn runtime_classes(&self) -> Option<std::sync::Arc<dyn crate::ports::RuntimeClassLister>> {
        None
    }
}
