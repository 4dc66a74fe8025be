//! Authentication (a verified client certificate, bearer tokens — static and bootstrap —,
//! optional anonymous access) and the node-restriction
//! authorizer: a `system:node:<name>` identity may write only its own Node, its own Lease in
//! `kube-node-lease`, status of pods bound to it, and Events — as the Node authorizer and the
//! NodeRestriction admission plugin enforce, with their messages.

use actix_web::http::header::{AUTHORIZATION, HeaderMap};
use serde_json::Value;

use crate::api::{ApiError, Target, Verb};
use crate::config::{AuthConfig, User};
use crate::store::Store;

/// The user a verified TLS client certificate names (x509 authentication: CN the user, each O
/// a group), kept with its connection, and when the certificate expires: the x509
/// authenticator verifies the chain at every request's time, so a connection outliving its
/// certificate gets 401.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateUser {
    pub user: User,
    pub not_after: std::time::SystemTime,
}

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    Anonymous,
    User(User),
}

impl Identity {
    /// The authenticated user, if any.
    pub fn user(&self) -> Option<&User> {
        match self {
            Identity::User(user) => Some(user),
            Identity::Anonymous => None,
        }
    }

    /// The node name for `system:node:<name>` users.
    pub fn node_name(&self) -> Option<&str> {
        match self {
            Identity::User(user) => user.name.strip_prefix("system:node:"),
            Identity::Anonymous => None,
        }
    }

    fn user_name(&self) -> &str {
        match self {
            Identity::User(user) => &user.name,
            Identity::Anonymous => "system:anonymous",
        }
    }
}

/// [`authenticate`] for a request served by one of the handlers beside the resource API.
pub fn authenticate_request(
    req: &actix_web::HttpRequest,
    state: &super::AppState,
) -> Result<Identity, ApiError> {
    authenticate(
        &state.auth,
        req.headers(),
        &state.store,
        req.conn_data::<CertificateUser>(),
    )
}

/// Resolves the caller as kube-apiserver's union authenticator does: the client certificate
/// first, then the `Authorization` header (a bootstrap token's shape goes to the bootstrap
/// token authenticator alone).
pub fn authenticate(
    config: &AuthConfig,
    headers: &HeaderMap,
    store: &Store,
    certificate: Option<&CertificateUser>,
) -> Result<Identity, ApiError> {
    if let Some(certificate) = certificate {
        if std::time::SystemTime::now() > certificate.not_after {
            return Err(ApiError::unauthorized());
        }
        return Ok(Identity::User(certificate.user.clone()));
    }
    let header = headers.get(AUTHORIZATION).and_then(|h| h.to_str().ok());
    let bootstrap = header
        .and_then(|value| value.strip_prefix("Bearer "))
        .and_then(|token| super::bootstrap_token::parse(token.trim()));
    if let Some((id, secret)) = bootstrap {
        return super::bootstrap_token::authenticate(
            store,
            id,
            secret,
            std::time::SystemTime::now(),
        )
        .map(Identity::User)
        .ok_or_else(ApiError::unauthorized);
    }
    match header {
        None if config.allow_anonymous => Ok(Identity::Anonymous),
        None => Err(ApiError::unauthorized()),
        Some(value) => {
            let token = value
                .strip_prefix("Bearer ")
                .map(str::trim)
                .ok_or_else(ApiError::unauthorized)?;
            config
                .tokens
                .get(token)
                .cloned()
                .map(Identity::User)
                .ok_or_else(ApiError::unauthorized)
        }
    }
}

/// Checks a write by a node identity. `existing` is the stored object (update, patch, delete),
/// `new` the request body (create). Everything else is allowed.
pub fn authorize(
    config: &AuthConfig,
    identity: &Identity,
    verb: Verb,
    target: &Target,
    existing: Option<&Value>,
    new: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(node) = identity.node_name().filter(|_| config.node_restriction) else {
        return Ok(());
    };
    if !verb.is_write() {
        return Ok(());
    }
    let resource = target.resource;
    let object_name = |v: Option<&Value>| {
        v.and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = target
        .name
        .clone()
        .or_else(|| object_name(new))
        .unwrap_or_default();
    let forbid = |cause: String| Err(ApiError::forbidden(resource, &name, &cause));
    match resource.plural {
        "nodes" if name != node => forbid(format!(
            "node {node:?} is not allowed to modify node {name:?}"
        )),
        "nodes" => Ok(()),
        "leases" if target.namespace.as_deref() != Some("kube-node-lease") => {
            forbid("can only access leases in the \"kube-node-lease\" system namespace".into())
        }
        "leases" if name != node => {
            forbid("can only access node lease with the same name as the requesting node".into())
        }
        "leases" | "events" => Ok(()),
        // The Node authorizer's `NodeRules`: a node may request its certificates.
        "certificatesigningrequests" if verb == Verb::Create => Ok(()),
        "pods" => {
            let pod = existing.or(new);
            let bound = pod
                .and_then(|p| p.pointer("/spec/nodeName"))
                .and_then(Value::as_str)
                == Some(node);
            match verb {
                Verb::Update | Verb::Patch
                    if target.subresource.as_deref() == Some("status") && bound =>
                {
                    Ok(())
                }
                Verb::Update | Verb::Patch if target.subresource.as_deref() == Some("status") => {
                    Err(rbac_denial(
                        identity,
                        verb,
                        target,
                        &name,
                        &format!("no relationship found between node '{node}' and this object"),
                    ))
                }
                Verb::Delete if bound => Ok(()),
                Verb::Delete => forbid(format!(
                    "node {node:?} can only delete pods with spec.nodeName set to itself"
                )),
                Verb::Create if bound => Ok(()),
                _ => forbid(format!("node {node:?} can only update pod status")),
            }
        }
        _ => Err(rbac_denial(identity, verb, target, &name, "")),
    }
}

/// The authorizer's denial message (`User "x" cannot patch resource "pods/status" in API group ""
/// in the namespace "default"`).
fn rbac_denial(
    identity: &Identity,
    verb: Verb,
    target: &Target,
    name: &str,
    reason: &str,
) -> ApiError {
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource.plural),
        None => target.resource.plural.to_string(),
    };
    let scope = match &target.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    let mut cause = format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        identity.user_name(),
        verb.as_str(),
        target.resource.group
    );
    if !reason.is_empty() {
        cause.push_str(": ");
        cause.push_str(reason);
    }
    ApiError::forbidden(target.resource, name, &cause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn restricted() -> AuthConfig {
        AuthConfig {
            node_restriction: true,
            ..AuthConfig::default()
        }
    }

    fn target(path: &str) -> Target {
        Target::parse(path).expect("valid path")
    }

    #[test]
    fn nodes_may_write_only_their_own_node_and_lease() {
        let me = Identity::User(User::node("n1"));
        let c = restricted();
        assert!(
            authorize(
                &c,
                &me,
                Verb::Patch,
                &target("/api/v1/nodes/n1/status"),
                None,
                None
            )
            .is_ok()
        );
        let err = authorize(
            &c,
            &me,
            Verb::Patch,
            &target("/api/v1/nodes/n2/status"),
            None,
            None,
        )
        .expect_err("other node");
        assert_eq!(
            err.message,
            "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
        );
        let lease = target("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2");
        let err = authorize(&c, &me, Verb::Update, &lease, None, None).expect_err("other lease");
        assert_eq!(
            err.message,
            "leases.coordination.k8s.io \"n2\" is forbidden: can only access node lease with the same name as the requesting node"
        );
        assert!(authorize(&c, &me, Verb::Get, &target("/api/v1/nodes/n2"), None, None).is_ok());
    }

    #[test]
    fn pod_status_writes_need_the_pod_bound_to_the_node() {
        let me = Identity::User(User::node("n1"));
        let status = target("/api/v1/namespaces/default/pods/p/status");
        let mine = json!({"spec": {"nodeName": "n1"}});
        let theirs = json!({"spec": {"nodeName": "n2"}});
        assert!(authorize(&restricted(), &me, Verb::Patch, &status, Some(&mine), None).is_ok());
        let err = authorize(
            &restricted(),
            &me,
            Verb::Patch,
            &status,
            Some(&theirs),
            None,
        )
        .expect_err("not bound");
        assert_eq!(err.code, 403);
        assert!(err.message.contains("User \"system:node:n1\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"default\""));
    }

    #[test]
    fn a_client_certificate_names_the_user_until_it_expires() {
        let config = AuthConfig::default();
        let headers = HeaderMap::new();
        let store = Store::new(10, 10);
        let now = std::time::SystemTime::now();
        let valid = CertificateUser {
            user: User::node("n1"),
            not_after: now + std::time::Duration::from_secs(60),
        };
        assert_eq!(
            authenticate(&config, &headers, &store, Some(&valid)),
            Ok(Identity::User(User::node("n1")))
        );
        let expired = CertificateUser {
            not_after: now - std::time::Duration::from_secs(1),
            ..valid
        };
        assert_eq!(
            authenticate(&config, &headers, &store, Some(&expired)).map_err(|e| e.code),
            Err(401)
        );
    }

    #[test]
    fn unknown_tokens_are_unauthorized_and_anonymous_can_be_disabled() {
        let mut config = AuthConfig {
            allow_anonymous: false,
            ..AuthConfig::default()
        };
        config.tokens.insert("good".into(), User::admin("alice"));
        let mut headers = HeaderMap::new();
        assert_eq!(
            authenticate(&config, &headers, &Store::new(10, 10), None).map_err(|e| e.code),
            Err(401)
        );
        headers.insert(AUTHORIZATION, "Bearer good".parse().expect("header"));
        assert_eq!(
            authenticate(&config, &headers, &Store::new(10, 10), None),
            Ok(Identity::User(User::admin("alice")))
        );
        headers.insert(AUTHORIZATION, "Bearer bad".parse().expect("header"));
        assert_eq!(
            authenticate(&config, &headers, &Store::new(10, 10), None).map_err(|e| e.reason),
            Err("Unauthorized")
        );
    }
}
