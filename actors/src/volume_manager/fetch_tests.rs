//! A token refused only while the API server's caches catch up with the pod is asked again
//! within a second; any other refusal is the volume's failure at once. On paused time.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use tokio::time::Instant;

use super::{
    VolumeSourceApi,
    content::{
        Fetched, SourceObject, TokenSpec,
        token::{IssuedToken, TokenCache},
    },
    fetch::fetch,
};
use crate::ports::{ApiError, ApiResult};

/// Answers each TokenRequest with the next of `answers` (granting once they run out) and
/// notes when it was asked.
#[derive(Clone, Default)]
struct ScriptedTokens {
    answers: Arc<Mutex<VecDeque<ApiError>>>,
    asked: Arc<Mutex<Vec<Instant>>>,
}

impl ScriptedTokens {
    fn refusing(answers: Vec<ApiError>) -> Self {
        Self {
            answers: Arc::new(Mutex::new(answers.into())),
            ..Self::default()
        }
    }

    /// When each TokenRequest came, from `start`.
    fn asked_after(&self, start: Instant) -> Vec<Duration> {
        let asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.iter().map(|at| at.duration_since(start)).collect()
    }
}

impl VolumeSourceApi for ScriptedTokens {
    fn get_config_map(&self, _: &str, _: &str) -> BoxFuture<'static, ApiResult<ConfigMap>> {
        Box::pin(async { Err(ApiError::NotFound("no configmaps here".into())) })
    }
    fn get_secret(&self, _: &str, _: &str) -> BoxFuture<'static, ApiResult<Secret>> {
        Box::pin(async { Err(ApiError::NotFound("no secrets here".into())) })
    }
    fn request_token(&self, _: &TokenSpec) -> BoxFuture<'static, ApiResult<IssuedToken>> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Instant::now());
        let answer = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        Box::pin(async move {
            match answer {
                Some(error) => Err(error),
                None => Ok(IssuedToken {
                    token: "granted".into(),
                    issued_at: Timestamp::UNIX_EPOCH,
                    expires_at: Timestamp::MAX,
                }),
            }
        })
    }
}

fn spec() -> TokenSpec {
    TokenSpec {
        namespace: "default".into(),
        service_account: "default".into(),
        audiences: Vec::new(),
        expiration_seconds: 3607,
        pod_name: "web-0".into(),
        pod_uid: "u1".into(),
    }
}

/// What NodeRestriction answers before its pod informer has the pod.
fn pod_not_found() -> ApiError {
    ApiError::NotFound("pod \"web-0\" not found".into())
}

/// What the Node authorizer answers before its graph links the node to the pod.
fn no_relationship() -> ApiError {
    ApiError::Refused {
        code: 403,
        reason: "Forbidden".into(),
        message: "serviceaccounts \"default\" is forbidden: User \"system:node:n1\" cannot create \
                  resource \"serviceaccounts/token\" in API group \"\" in the namespace \
                  \"default\": no relationship found between node 'n1' and this object"
            .into(),
    }
}

/// Fetches the token of [`spec`] from `api`: what came of it, and when each request went.
async fn fetch_token(api: &ScriptedTokens) -> (Fetched, Vec<Duration>) {
    let start = Instant::now();
    let source = SourceObject::Token(spec());
    let mut outcome = fetch(
        Arc::new(api.clone()),
        vec![source.clone()],
        &TokenCache::default(),
        Timestamp::UNIX_EPOCH,
    )
    .await;
    let fetched = outcome.fetched.remove(&source).expect("fetched");
    (fetched, api.asked_after(start))
}

fn millis(values: &[u64]) -> Vec<Duration> {
    values.iter().copied().map(Duration::from_millis).collect()
}

#[tokio::test(start_paused = true)]
async fn a_token_refused_while_the_caches_lag_is_asked_again_within_a_second() {
    let api = ScriptedTokens::refusing(vec![pod_not_found(), no_relationship(), pod_not_found()]);
    let (fetched, asked) = fetch_token(&api).await;
    assert_eq!(fetched, Fetched::Token("granted".into()));
    // Asked at once, then after 100, 200 and 300 ms more: granted 600 ms after the first try,
    // where the volume manager's back-off alone would have waited 500 + 1,000 + 2,000 ms.
    assert_eq!(asked, millis(&[0, 100, 300, 600]));
}

#[tokio::test(start_paused = true)]
async fn a_lag_that_outlasts_the_waits_is_the_volumes_failure() {
    let api = ScriptedTokens::refusing(vec![pod_not_found(); 6]);
    let (fetched, asked) = fetch_token(&api).await;
    assert_eq!(
        fetched,
        Fetched::Failed(pod_not_found().to_string()),
        "after one second the refusal goes to the volume manager's back-off"
    );
    assert_eq!(asked, millis(&[0, 100, 300, 600, 1000]));
}

#[tokio::test(start_paused = true)]
async fn any_other_refusal_fails_at_once() {
    let refusals = [
        // The ServiceAccount itself is missing: asking again does not help.
        ApiError::NotFound("serviceaccounts \"default\" not found".into()),
        // Another pod of the same name is not this pod's lag.
        ApiError::NotFound("pod \"web-1\" not found".into()),
        ApiError::Refused {
            code: 403,
            reason: "Forbidden".into(),
            message: "serviceaccounts \"default\" is forbidden: the pod's UID does not match"
                .into(),
        },
        ApiError::Refused {
            code: 422,
            reason: "Invalid".into(),
            message: "no relationship found between node 'n1' and this object".into(),
        },
    ];
    for refusal in refusals {
        let api = ScriptedTokens::refusing(vec![refusal.clone()]);
        let (fetched, asked) = fetch_token(&api).await;
        assert_eq!(fetched, Fetched::Failed(refusal.to_string()), "{refusal}");
        assert_eq!(asked, millis(&[0]), "{refusal}: asked once");
    }
}
