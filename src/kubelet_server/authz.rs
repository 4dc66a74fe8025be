//! Whether an authenticated user may make a request, as the kubelet asks it: one record per
//! candidate subresource of the path (`nodes/pods` then `nodes/proxy` for `/pods`, …; fine-
//! grained authorization is locked on in 1.36), verb from the method, the node's name; allowed
//! when any record is. `Webhook` asks a SubjectAccessReview per record (cached 5 m allowed,
//! 30 s denied); `AlwaysAllow` allows everything.

use std::{sync::Arc, time::Duration};

use http::Method;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};

use super::{
    authn::User,
    cache::{ReviewCache, digest},
    reviews::Reviews,
};

pub enum Authorizer {
    AlwaysAllow,
    Webhook(AccessWebhook),
}

pub struct AccessWebhook {
    pub reviews: Arc<dyn Reviews>,
    pub allowed_ttl: Duration,
    pub denied_ttl: Duration,
    pub cache: ReviewCache<bool>,
}

/// A refusal, with the body and status the kubelet answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// 403 `Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[…])`.
    #[error("Forbidden (user={user}, verb={verb}, resource=nodes, subresource(s)=[{}])\n", .subresources.join(" "))]
    Forbidden {
        user: String,
        verb: String,
        subresources: Vec<String>,
    },
    /// 500: a review that got no answer.
    #[error(
        "Authorization error (user={user}, verb={verb}, resource=nodes, subresource={subresource})"
    )]
    Failed {
        user: String,
        verb: String,
        subresource: String,
    },
}

/// The kubelet's verb for an HTTP method; empty for the others (HEAD, OPTIONS).
pub fn verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The candidate subresources of a path, in the order they are asked.
pub fn subresources(path: &str) -> &'static [&'static str] {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if under("/pods") || under("/runningpods") {
        &["pods", "proxy"]
    } else if under("/healthz") {
        &["healthz", "proxy"]
    } else if under("/configz") {
        &["configz", "proxy"]
    } else if under("/stats") {
        &["stats"]
    } else if under("/metrics") {
        &["metrics"]
    } else if under("/logs") {
        &["log"]
    } else if under("/checkpoint") {
        &["checkpoint"]
    } else if under("/statusz") {
        &["statusz"]
    } else if under("/flagz") {
        &["configz"]
    } else {
        &["proxy"]
    }
}

impl Authorizer {
    pub async fn authorize(
        &self,
        user: &User,
        method: &Method,
        path: &str,
        node_name: &str,
    ) -> Result<(), Refused> {
        let Self::Webhook(webhook) = self else {
            return Ok(());
        };
        let verb = verb(method);
        let candidates = subresources(path);
        for subresource in candidates {
            match webhook.allows(user, verb, subresource, node_name).await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(()) => {
                    return Err(Refused::Failed {
                        user: user.name.clone(),
                        verb: verb.to_owned(),
                        subresource: (*subresource).to_owned(),
                    });
                }
            }
        }
        Err(Refused::Forbidden {
            user: user.name.clone(),
            verb: verb.to_owned(),
            subresources: candidates.iter().map(|s| (*s).to_owned()).collect(),
        })
    }
}

impl AccessWebhook {
    async fn allows(
        &self,
        user: &User,
        verb: &str,
        subresource: &str,
        node_name: &str,
    ) -> Result<bool, ()> {
        let spec = access_review(user, verb, subresource, node_name);
        let key = digest(&[serde_json::to_string(&spec).unwrap_or_default().as_bytes()]);
        if let Some(allowed) = self.cache.get(&key) {
            return Ok(allowed);
        }
        let status = self.reviews.access_review(spec).await.map_err(|error| {
            tracing::warn!(%error, user = %user.name, %subresource, "the SubjectAccessReview failed");
        })?;
        let allowed = status.allowed && status.denied != Some(true);
        let ttl = if allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        self.cache.put(key, allowed, ttl);
        Ok(allowed)
    }
}

/// The review of one record: `{verb} nodes/{subresource} {node}` for the user.
pub fn access_review(
    user: &User,
    verb: &str,
    subresource: &str,
    node_name: &str,
) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: Some(user.name.clone()),
        uid: user.uid.clone(),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
        resource_attributes: Some(ResourceAttributes {
            verb: Some(verb.to_owned()),
            version: Some("v1".to_owned()),
            group: Some(String::new()),
            resource: Some("nodes".to_owned()),
            subresource: Some(subresource.to_owned()),
            name: Some(node_name.to_owned()),
            namespace: Some(String::new()),
            ..ResourceAttributes::default()
        }),
        ..SubjectAccessReviewSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::future::BoxFuture;
    use k8s_openapi::api::{
        authentication::v1::TokenReviewStatus, authorization::v1::SubjectAccessReviewStatus,
    };

    use super::super::reviews::ReviewError;
    use super::*;

    /// Allows `proxy` only; records every subresource it was asked about.
    #[derive(Default)]
    struct ProxyOnly {
        asked: Mutex<Vec<String>>,
    }

    impl Reviews for ProxyOnly {
        fn token_review(
            &self,
            _token: String,
        ) -> BoxFuture<'static, Result<TokenReviewStatus, ReviewError>> {
            Box::pin(async { Err(ReviewError("not asked here".into())) })
        }

        fn access_review(
            &self,
            spec: SubjectAccessReviewSpec,
        ) -> BoxFuture<'static, Result<SubjectAccessReviewStatus, ReviewError>> {
            let attributes = spec.resource_attributes.unwrap_or_default();
            let subresource = attributes.subresource.unwrap_or_default();
            self.asked.lock().expect("lock").push(format!(
                "{} nodes/{subresource} {}",
                attributes.verb.unwrap_or_default(),
                attributes.name.unwrap_or_default()
            ));
            Box::pin(async move {
                Ok(SubjectAccessReviewStatus {
                    allowed: subresource == "proxy",
                    ..SubjectAccessReviewStatus::default()
                })
            })
        }
    }

    fn webhook(reviews: Arc<ProxyOnly>) -> Authorizer {
        Authorizer::Webhook(AccessWebhook {
            reviews,
            allowed_ttl: Duration::from_secs(300),
            denied_ttl: Duration::from_secs(30),
            cache: ReviewCache::default(),
        })
    }

    fn alice() -> User {
        User {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        }
    }

    #[test]
    fn paths_map_to_the_kubelets_subresources() {
        for (path, expected) in [
            ("/pods", &["pods", "proxy"][..]),
            ("/pods/", &["pods", "proxy"]),
            ("/podsx", &["proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/healthz/ping", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
            ("/stats/summary", &["stats"]),
            ("/metrics/resource", &["metrics"]),
            ("/logs/syslog", &["log"]),
            ("/containerLogs/ns/p/c", &["proxy"]),
            ("/exec/ns/p/c", &["proxy"]),
            ("/run/ns/p/c", &["proxy"]),
            ("/flagz", &["configz"]),
        ] {
            assert_eq!(subresources(path), expected, "{path}");
        }
        assert_eq!(
            [
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
                Method::HEAD
            ]
            .iter()
            .map(verb)
            .collect::<Vec<_>>(),
            ["get", "create", "update", "patch", "delete", ""]
        );
    }

    #[tokio::test]
    async fn any_allowed_candidate_allows_and_answers_are_cached() {
        let reviews = Arc::new(ProxyOnly::default());
        let authorizer = webhook(Arc::clone(&reviews));
        for _ in 0..2 {
            authorizer
                .authorize(&alice(), &Method::GET, "/pods", "np-node")
                .await
                .expect("allowed through nodes/proxy");
        }
        assert_eq!(
            *reviews.asked.lock().expect("lock"),
            ["get nodes/pods np-node", "get nodes/proxy np-node"]
        );
    }

    #[tokio::test]
    async fn a_refusal_names_the_user_verb_and_every_candidate() {
        let authorizer = webhook(Arc::default());
        let refused = authorizer
            .authorize(&alice(), &Method::GET, "/stats/summary", "np-node")
            .await
            .expect_err("stats is not proxy");
        assert_eq!(
            refused.to_string(),
            "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[stats])\n"
        );
        let two = Refused::Forbidden {
            user: "bob".into(),
            verb: "create".into(),
            subresources: vec!["pods".into(), "proxy".into()],
        };
        assert_eq!(
            two.to_string(),
            "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[pods proxy])\n"
        );
    }
}
