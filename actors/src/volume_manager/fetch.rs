//! Fetching what an API-backed volume is built from: each ConfigMap and Secret asked of the port
//! at every (re)mount (the adapter answers from its watch of the object), each
//! token taken from the cache unless it requires refresh (then asked of the TokenRequest API,
//! the old one still served while unexpired if that fails). Owned futures, so the actor's
//! mailbox never waits on the API.
//!
//! Deviation, for speed: a TokenRequest the API server refuses only because its caches do not
//! know the pod yet is asked again within a second ([`CACHE_LAG_WAITS`]), where the kubelet
//! waits out its volume back-off (500 ms first, doubling). A node that asks as soon as the pod
//! is bound meets that lag whenever the API server is busy: in a 100-pod burst on the
//! conformance kit 50 of 150 TokenRequests were refused `404 pod "…" not found` 0.1–0.6 s after
//! the pod's create, and each pod waited its half second before the next try.

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

/// The waits before asking again for a token refused for [`cache_lag`] (one second in all);
/// after them the refusal is the volume's failure, retried on the volume manager's back-off.
const CACHE_LAG_WAITS: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(300),
    Duration::from_millis(400),
];

/// Whether the API server refused `pod`'s token only because a cache of its own has not seen
/// the pod yet: the NodeRestriction admission plugin reads pods from an informer (`404 pod
/// "NAME" not found`, where a missing ServiceAccount says `serviceaccounts "NAME" not found`)
/// and the Node authorizer from its graph (`403 … no relationship found between node …`).
fn cache_lag(error: &ApiError, pod: &str) -> bool {
    match error {
        ApiError::NotFound(message) => message.contains(&format!("pod \"{pod}\" not found")),
        ApiError::Refused {
            code: 403, message, ..
        } => message.contains("no relationship found between node"),
        _ => false,
    }
}

/// `spec`'s token from the TokenRequest API, asked again after each of [`CACHE_LAG_WAITS`]
/// while the refusal is only [`cache_lag`].
async fn request_token(api: &dyn VolumeSourceApi, spec: &TokenSpec) -> ApiResult<IssuedToken> {
    let mut waits = CACHE_LAG_WAITS.iter();
    loop {
        match api.request_token(spec).await {
            Err(error) if cache_lag(&error, &spec.pod_name) => match waits.next() {
                Some(wait) => {
                    tracing::debug!(%error, pod = %spec.pod_name, ?wait, "token refused while the API server's caches catch up with the pod; asking again");
                    tokio::time::sleep(*wait).await;
                }
                None => return Err(error),
            },
            answer => return answer,
        }
    }
}

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
                        None => match request_token(&*api, spec).await {
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
