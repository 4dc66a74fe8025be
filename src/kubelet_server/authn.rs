//! Who a request comes from, as the kubelet's delegating authenticator decides: a client
//! certificate that verifies against `clientCAFile`, else a bearer token (the `Authorization`
//! header or the WebSocket `base64url.bearer.authorization.k8s.io.` subprotocol) that a cached
//! TokenReview accepts, else — only when enabled and nothing was presented — anonymous. A
//! credential that was presented and failed is a 401 even with anonymous access on.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use base64::Engine as _;
use http::HeaderMap;
use rustls::pki_types::{CertificateDer, UnixTime};

use super::{
    cache::{ReviewCache, digest},
    reviews::Reviews,
    x509::ClientCa,
};

/// An authenticated caller, as the SubjectAccessReview names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why a request is not authenticated; its answer is the kubelet's 401 `Unauthorized`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    #[error("no credentials")]
    NoCredentials,
    #[error("{0}")]
    Certificate(String),
    #[error("invalid bearer token")]
    InvalidToken,
    #[error("the TokenReview failed: {0}")]
    Review(String),
}

const WEBSOCKET_TOKEN_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

pub struct Authenticator {
    pub client_ca: Option<ClientCa>,
    /// Bearer tokens are reviewed when set (`authentication.webhook.enabled`).
    pub tokens: Option<TokenWebhook>,
    pub anonymous: bool,
}

pub struct TokenWebhook {
    pub reviews: Arc<dyn Reviews>,
    pub ttl: Duration,
    /// Per token digest: the user, or `None` for a token the API server refused.
    pub cache: ReviewCache<Option<User>>,
}

impl Authenticator {
    pub async fn authenticate(
        &self,
        peer: &[CertificateDer<'static>],
        headers: &HeaderMap,
    ) -> Result<User, Unauthenticated> {
        let mut failure = None;
        if let (Some(ca), false) = (&self.client_ca, peer.is_empty()) {
            match ca.authenticate(peer, UnixTime::now()) {
                Ok(user) => {
                    return Ok(authenticated(User {
                        name: user.name,
                        groups: user.groups,
                        ..User::default()
                    }));
                }
                Err(error) => failure = Some(Unauthenticated::Certificate(error.to_string())),
            }
        }
        if let (Some(webhook), Some(token)) = (&self.tokens, bearer_token(headers)) {
            match webhook.review(token).await {
                Ok(user) => return Ok(authenticated(user)),
                Err(error) => failure = Some(error),
            }
        }
        match failure {
            Some(error) => Err(error),
            None if self.anonymous => Ok(User {
                name: "system:anonymous".to_owned(),
                groups: vec!["system:unauthenticated".to_owned()],
                ..User::default()
            }),
            None => Err(Unauthenticated::NoCredentials),
        }
    }
}

/// Every authenticated user is also in `system:authenticated`.
fn authenticated(mut user: User) -> User {
    if !user
        .groups
        .iter()
        .any(|group| group == "system:authenticated")
    {
        user.groups.push("system:authenticated".to_owned());
    }
    user
}

impl TokenWebhook {
    async fn review(&self, token: String) -> Result<User, Unauthenticated> {
        let key = digest(&[token.as_bytes()]);
        if let Some(cached) = self.cache.get(&key) {
            return cached.ok_or(Unauthenticated::InvalidToken);
        }
        let status = self
            .reviews
            .token_review(token)
            .await
            .map_err(|error| Unauthenticated::Review(error.0))?;
        let user = status
            .authenticated
            .unwrap_or(false)
            .then_some(status.user)
            .flatten()
            .map(|info| User {
                name: info.username.unwrap_or_default(),
                uid: info.uid.filter(|uid| !uid.is_empty()),
                groups: info.groups.unwrap_or_default(),
                extra: info.extra.unwrap_or_default().into_iter().collect(),
            });
        self.cache.put(key, user.clone(), self.ttl);
        user.ok_or(Unauthenticated::InvalidToken)
    }
}

/// The bearer token of `Authorization: Bearer <t>`, else of a WebSocket subprotocol
/// `base64url.bearer.authorization.k8s.io.<base64url(t)>`.
fn bearer_token(headers: &HeaderMap) -> Option<String> {
    if let Some(value) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
    {
        let mut parts = value.split_whitespace();
        return match (parts.next(), parts.next()) {
            (Some(scheme), Some(token)) if scheme.eq_ignore_ascii_case("bearer") => {
                Some(token.to_owned())
            }
            _ => None,
        };
    }
    headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|protocol| protocol.trim().strip_prefix(WEBSOCKET_TOKEN_PREFIX))
        .find_map(|encoded| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded.trim_end_matches('='))
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
        })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::future::BoxFuture;
    use k8s_openapi::api::{
        authentication::v1::{TokenReviewStatus, UserInfo},
        authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus},
    };

    use super::super::reviews::ReviewError;
    use super::*;

    /// Knows one token, `good`, as user `alice`; counts the reviews asked.
    #[derive(Default)]
    struct OneToken {
        asked: AtomicUsize,
    }

    impl Reviews for OneToken {
        fn token_review(
            &self,
            token: String,
        ) -> BoxFuture<'static, Result<TokenReviewStatus, ReviewError>> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(TokenReviewStatus {
                    authenticated: Some(token == "good"),
                    user: (token == "good").then(|| UserInfo {
                        username: Some("alice".into()),
                        groups: Some(vec!["devs".into()]),
                        ..UserInfo::default()
                    }),
                    ..TokenReviewStatus::default()
                })
            })
        }

        fn access_review(
            &self,
            _spec: SubjectAccessReviewSpec,
        ) -> BoxFuture<'static, Result<SubjectAccessReviewStatus, ReviewError>> {
            Box::pin(async { Err(ReviewError("not asked here".into())) })
        }
    }

    fn authenticator(reviews: Arc<OneToken>, anonymous: bool) -> Authenticator {
        Authenticator {
            client_ca: None,
            tokens: Some(TokenWebhook {
                reviews,
                ttl: Duration::from_secs(120),
                cache: ReviewCache::default(),
            }),
            anonymous,
        }
    }

    fn with_header(name: http::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().expect("header"));
        headers
    }

    #[tokio::test]
    async fn a_reviewed_token_is_its_user_and_both_answers_are_cached() {
        let reviews = Arc::new(OneToken::default());
        let authn = authenticator(Arc::clone(&reviews), false);
        let good = with_header(http::header::AUTHORIZATION, "Bearer good");
        for _ in 0..2 {
            let user = authn.authenticate(&[], &good).await.expect("alice");
            assert_eq!(user.name, "alice");
            assert_eq!(user.groups, ["devs", "system:authenticated"]);
        }
        let bad = with_header(http::header::AUTHORIZATION, "Bearer bad");
        for _ in 0..2 {
            assert_eq!(
                authn.authenticate(&[], &bad).await,
                Err(Unauthenticated::InvalidToken)
            );
        }
        assert_eq!(
            reviews.asked.load(Ordering::SeqCst),
            2,
            "one review per token"
        );
    }

    #[tokio::test]
    async fn the_websocket_subprotocol_carries_a_token_too() {
        let authn = authenticator(Arc::default(), false);
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("good");
        let headers = with_header(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            &format!("v5.channel.k8s.io, {WEBSOCKET_TOKEN_PREFIX}{encoded}"),
        );
        let user = authn.authenticate(&[], &headers).await.expect("alice");
        assert_eq!(user.name, "alice");
    }

    #[tokio::test]
    async fn anonymous_only_when_enabled_and_nothing_was_presented() {
        let closed = authenticator(Arc::default(), false);
        assert_eq!(
            closed.authenticate(&[], &HeaderMap::new()).await,
            Err(Unauthenticated::NoCredentials)
        );
        let open = authenticator(Arc::default(), true);
        let anonymous = open
            .authenticate(&[], &HeaderMap::new())
            .await
            .expect("anonymous");
        assert_eq!(
            (anonymous.name.as_str(), anonymous.groups.as_slice()),
            (
                "system:anonymous",
                ["system:unauthenticated".to_owned()].as_slice()
            )
        );
        let bad = with_header(http::header::AUTHORIZATION, "Bearer bad");
        assert_eq!(
            open.authenticate(&[], &bad).await,
            Err(Unauthenticated::InvalidToken),
            "a refused token is not anonymous"
        );
    }
}
