//! The API server's two reviews the kubelet API asks for, as a port: a TokenReview for a
//! bearer token and a SubjectAccessReview for a request, posted through the main client (the
//! kubelet's authn/authz webhooks use its own client too). Tests answer them with a fake.

use futures::future::BoxFuture;
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus},
    authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus},
};
use kube::api::{Api, PostParams};

use crate::apiserver_client::KubeApi;

/// A review that got no answer: the request fails (401 for a token, 500 for access), and the
/// next request asks again.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ReviewError(pub String);

pub trait Reviews: Send + Sync {
    fn token_review(
        &self,
        token: String,
    ) -> BoxFuture<'static, Result<TokenReviewStatus, ReviewError>>;

    fn access_review(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> BoxFuture<'static, Result<SubjectAccessReviewStatus, ReviewError>>;
}

impl Reviews for KubeApi {
    fn token_review(
        &self,
        token: String,
    ) -> BoxFuture<'static, Result<TokenReviewStatus, ReviewError>> {
        let client = self.main_client_handle();
        let timeout = self.heartbeat_timeout();
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token,
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let api: Api<TokenReview> = Api::all(client.await);
            let answer = tokio::time::timeout(timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| ReviewError(format!("the TokenReview took longer than {timeout:?}")))?
                .map_err(|error| ReviewError(error.to_string()))?;
            Ok(answer.status.unwrap_or_default())
        })
    }

    fn access_review(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> BoxFuture<'static, Result<SubjectAccessReviewStatus, ReviewError>> {
        let client = self.main_client_handle();
        let timeout = self.heartbeat_timeout();
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec,
                ..SubjectAccessReview::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(client.await);
            let answer = tokio::time::timeout(timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| {
                    ReviewError(format!(
                        "the SubjectAccessReview took longer than {timeout:?}"
                    ))
                })?
                .map_err(|error| ReviewError(error.to_string()))?;
            answer
                .status
                .ok_or_else(|| ReviewError("the SubjectAccessReview has no status".to_owned()))
        })
    }
}
