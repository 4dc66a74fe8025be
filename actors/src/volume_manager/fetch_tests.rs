//! A token refused only while the API server's caches catch up with the pod is asked again
//! within a second; any other refusal is the volume's failure at once. On paused time.

use std::{sync::Arc, time::Duration};

use jiff::Timestamp;
use tokio::time::Instant;

use super::{
    content::{Fetched, SourceObject, TokenSpec, token::TokenCache},
    fetch::fetch,
    ports::fakes::objects::FakeObjects,
};
use crate::ports::ApiError;

/// A fake API that refuses the first TokenRequests with `refusals` and grants the rest.
fn refusing(refusals: Vec<ApiError>) -> FakeObjects {
    let api = FakeObjects::default();
    api.grant_tokens_after(refusals);
    api
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
async fn fetch_token(api: &FakeObjects) -> (Fetched, Vec<Duration>) {
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
    (fetched, api.tokens_asked_after(start))
}

fn millis(values: &[u64]) -> Vec<Duration> {
    values.iter().copied().map(Duration::from_millis).collect()
}

#[tokio::test(start_paused = true)]
async fn a_token_refused_while_the_caches_lag_is_asked_again_within_a_second() {
    let api = refusing(vec![pod_not_found(), no_relationship(), pod_not_found()]);
    let (fetched, asked) = fetch_token(&api).await;
    assert_eq!(fetched, Fetched::Token("granted".into()));
    // Asked at once, then after 100, 200 and 300 ms more: granted 600 ms after the first try,
    // where the volume manager's back-off alone would have waited 500 + 1,000 + 2,000 ms.
    assert_eq!(asked, millis(&[0, 100, 300, 600]));
}

#[tokio::test(start_paused = true)]
async fn a_lag_that_outlasts_the_waits_is_the_volumes_failure() {
    let api = refusing(vec![pod_not_found(); 6]);
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
        let api = refusing(vec![refusal.clone()]);
        let (fetched, asked) = fetch_token(&api).await;
        assert_eq!(fetched, Fetched::Failed(refusal.to_string()), "{refusal}");
        assert_eq!(asked, millis(&[0]), "{refusal}: asked once");
    }
}
