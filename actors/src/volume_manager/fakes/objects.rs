//! A fake of the API objects port (`VolumeSourceApi`): ConfigMaps and Secrets a test sets and
//! changes while actors run, answered as the API server would (404 for a missing one); no
//! tokens.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::{
    ports::{ApiError, ApiResult},
    volume_manager::VolumeSourceApi,
    volume_manager::content::{TokenSpec, token::IssuedToken},
};

/// ConfigMaps by name (any namespace); clones share them.
#[derive(Clone, Default)]
pub struct FakeObjects {
    config_maps: Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>,
    secrets: Arc<Mutex<BTreeMap<String, Secret>>>,
}

impl FakeObjects {
    /// Creates or replaces the ConfigMap `name` with `data`.
    pub fn set_config_map(&self, name: &str, data: &[(&str, &str)]) {
        let data = data
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        self.config_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), data);
    }
}

impl FakeObjects {
    /// Creates or replaces the Secret `name`.
    pub fn set_secret(&self, name: &str, secret: Secret) {
        self.secrets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), secret);
    }
}

impl VolumeSourceApi for FakeObjects {
    fn get_config_map(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<ConfigMap>> {
        let found = self
            .config_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        let name = name.to_owned();
        Box::pin(async move {
            found
                .map(|data| ConfigMap {
                    data: Some(data),
                    ..ConfigMap::default()
                })
                .ok_or(ApiError::NotFound(format!("configmaps {name:?} not found")))
        })
    }
    fn get_secret(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<Secret>> {
        let found = self
            .secrets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        let name = name.to_owned();
        Box::pin(
            async move { found.ok_or(ApiError::NotFound(format!("secrets {name:?} not found"))) },
        )
    }
    fn request_token(&self, _: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        Box::pin(async { Err(ApiError::NotFound("no tokens here".into())) })
    }
}
