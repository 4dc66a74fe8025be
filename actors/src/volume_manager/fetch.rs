//! Fetching what an API-backed volume is built from: each ConfigMap and Secret asked of the port
//! at every (re)mount (the adapter answers from its watch of the object), each
//! token taken from the cache unless it requires refresh (then asked of the TokenRequest API,
//! the old one still served while unexpired if that fails). Owned futures, so the actor's
//! mailbox never waits on the API.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::content::{
    Fetched, FetchedObject, SourceObject, TokenSpec,
    token::{IssuedToken, MAX_JITTER, TokenCache},
};
use crate::{
    ports::{ApiError, ApiResult},
    volume_manager::VolumeSourceApi,
};

/// What one fetch produced: the objects, and the tokens newly issued (for the cache).
#[derive(Debug, Default)]
pub struct FetchOutcome {
    pub fetched: BTreeMap<SourceObject, Fetched>,
    pub issued: Vec<(TokenSpec, IssuedToken)>,
}

/// Fetches `sources`, with `tokens` the cache as it is now.
pub fn fetch(
    api: Arc<dyn VolumeSourceApi>,
    sources: Vec<SourceObject>,
    tokens: &TokenCache,
    now: Timestamp,
) -> BoxFuture<'static, FetchOutcome> {
    let jitter = Duration::from_secs(rand::random::<u64>() % MAX_JITTER.as_secs());
    let cached: BTreeMap<TokenSpec, (Option<IssuedToken>, Option<IssuedToken>)> = sources
        .iter()
        .filter_map(|source| match source {
            SourceObject::Token(spec) => Some((
                spec.clone(),
                (
                    tokens.fresh(spec, now, jitter).cloned(),
                    tokens.unexpired(spec, now).cloned(),
                ),
            )),
            _ => None,
        })
        .collect();
    Box::pin(async move {
        let mut outcome = FetchOutcome::default();
        for source in sources {
            let fetched = match &source {
                SourceObject::ConfigMap { namespace, name } => object(
                    api.get_config_map(namespace, name)
                        .await
                        .map(config_map_data),
                ),
                SourceObject::Secret { namespace, name } => {
                    object(api.get_secret(namespace, name).await.map(secret_data))
                }
                SourceObject::Token(spec) => {
                    let (fresh, unexpired) = cached.get(spec).cloned().unwrap_or_default();
                    match fresh {
                        Some(token) => Fetched::Token(token.token),
                        None => match api.request_token(spec).await {
                            Ok(token) => {
                                outcome.issued.push((spec.clone(), token.clone()));
                                Fetched::Token(token.token)
                            }
                            Err(error) => match unexpired {
                                Some(token) => {
                                    tracing::warn!(%error, service_account = %spec.service_account, "token refresh failed; the current token is still valid");
                                    Fetched::Token(token.token)
                                }
                                None => Fetched::Failed(error.to_string()),
                            },
                        },
                    }
                }
            };
            outcome.fetched.insert(source, fetched);
        }
        outcome
    })
}

fn object(result: ApiResult<FetchedObject>) -> Fetched {
    match result {
        Ok(object) => Fetched::Object(object),
        Err(ApiError::NotFound(_)) => Fetched::NotFound,
        Err(error) => Fetched::Failed(error.to_string()),
    }
}

/// `data` and `binaryData` together, as the configMap plugin reads them.
pub fn config_map_data(config_map: ConfigMap) -> FetchedObject {
    let text = config_map
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.into_bytes()));
    let binary = config_map
        .binary_data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0));
    text.chain(binary).collect()
}

/// `data` (the API server has already folded `stringData` into it).
pub fn secret_data(secret: Secret) -> FetchedObject {
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect()
}
