//! Request targets: which resource, namespace, name and subresource a URL path names, and the
//! Kubernetes verb a method + path + query amount to (kube-apiserver's `RequestInfo`).
//!
//! Pure parsing with no knowledge of stored objects.

use super::resource::ApiResource;

/// The object or collection a request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: &'static ApiResource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// The Kubernetes verbs (authorization and fault-injection vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    Deletecollection,
}

impl Verb {
    /// The lowercase verb as RBAC and audit logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Deletecollection => "deletecollection",
        }
    }

    /// Whether the verb changes stored state.
    pub fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

/// Why a path is not a resource path the emulator serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// Not below `/api/` or `/apis/` at all (discovery and health paths are routed elsewhere).
    NotAnApiPath,
    /// Below `/api(s)` but naming nothing the emulator serves.
    Unknown,
}

impl Target {
    /// Parses `/api/v1/...` and `/apis/{group}/{version}/...` resource paths.
    pub fn parse(path: &str) -> Result<Target, TargetError> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(TargetError::NotAnApiPath),
        };
        let owned = |s: &str| Some(s.to_string());
        let (namespace, plural, name, subresource) = match rest {
            ["namespaces", ns, plural, tail @ ..] => match tail {
                [] => (owned(ns), *plural, None, None),
                [name] => (owned(ns), *plural, owned(name), None),
                [name, sub] => (owned(ns), *plural, owned(name), owned(sub)),
                _ => return Err(TargetError::Unknown),
            },
            [plural] => (None, *plural, None, None),
            [plural, name] => (None, *plural, owned(name), None),
            [plural, name, sub] => (None, *plural, owned(name), owned(sub)),
            _ => return Err(TargetError::Unknown),
        };
        // `/api/v1/namespaces/{name}/status` names the Namespace object itself, not a collection.
        let (namespace, plural, name, subresource) = match (&namespace, plural, &name, &subresource)
        {
            (Some(ns), "status", None, None) | (Some(ns), "finalize", None, None)
                if group.is_empty() =>
            {
                (
                    None,
                    "namespaces",
                    Some(ns.clone()),
                    Some(plural.to_string()),
                )
            }
            _ => (namespace, plural, name, subresource),
        };
        let resource = ApiResource::lookup(group, version, plural).ok_or(TargetError::Unknown)?;
        if namespace.is_some() && !resource.namespaced {
            return Err(TargetError::Unknown);
        }
        let served = |sub: &str| {
            (sub == "status" && resource.has_status)
                || (sub == "token" && resource.stored == super::StoredKind::ServiceAccount)
                || (sub == "ephemeralcontainers" && resource.stored == super::StoredKind::Pod)
        };
        if let Some(sub) = &subresource
            && !served(sub)
        {
            return Err(TargetError::Unknown);
        }
        Ok(Target {
            resource,
            namespace,
            name,
            subresource,
        })
    }

    /// The verb for `method` on this target; `watch` is the `?watch=true` query flag.
    pub fn verb(&self, method: &str, watch: bool) -> Option<Verb> {
        let verb = match (method, self.name.is_some()) {
            ("GET" | "HEAD", false) if watch => Verb::Watch,
            ("GET" | "HEAD", false) => Verb::List,
            ("GET" | "HEAD", true) if watch => Verb::Watch,
            ("GET" | "HEAD", true) => Verb::Get,
            ("POST", false) => Verb::Create,
            // TokenRequest: `POST serviceaccounts/{name}/token` creates a token.
            ("POST", true) if self.subresource.as_deref() == Some("token") => Verb::Create,
            ("PUT", true) => Verb::Update,
            ("PATCH", true) => Verb::Patch,
            ("DELETE", true) => Verb::Delete,
            ("DELETE", false) => Verb::Deletecollection,
            _ => return None,
        };
        Some(verb)
    }

    /// The namespace a create/update lands in, or "" for cluster-scoped resources.
    pub fn namespace_or_empty(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_group_and_named_group_paths() {
        let t = Target::parse("/api/v1/nodes/n1/status").expect("node status path");
        assert_eq!(
            (
                t.resource.plural,
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("nodes", Some("n1"), Some("status"))
        );
        let t = Target::parse("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1")
            .expect("lease path");
        assert_eq!(
            (t.resource.plural, t.namespace.as_deref(), t.name.as_deref()),
            ("leases", Some("kube-node-lease"), Some("n1"))
        );
        let t = Target::parse("/apis/coordination.k8s.io/v1/leases").expect("all leases");
        assert_eq!((t.namespace, t.name), (None, None));
    }

    #[test]
    fn namespaces_are_objects_not_collections() {
        let t = Target::parse("/api/v1/namespaces/default").expect("namespace path");
        assert_eq!(
            (t.resource.plural, t.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let t = Target::parse("/api/v1/namespaces/default/status").expect("namespace status");
        assert_eq!(
            (t.name.as_deref(), t.subresource.as_deref()),
            (Some("default"), Some("status"))
        );
        let t = Target::parse("/api/v1/namespaces/default/pods").expect("pods in namespace");
        assert_eq!(
            (t.resource.plural, t.namespace.as_deref()),
            ("pods", Some("default"))
        );
    }

    #[test]
    fn rejects_unknown_resources_and_subresources() {
        assert_eq!(
            Target::parse("/api/v1/endpoints"),
            Err(TargetError::Unknown)
        );
        assert_eq!(
            Target::parse("/api/v1/namespaces/x/pods/p/token"),
            Err(TargetError::Unknown),
            "only ServiceAccounts have a token subresource"
        );
        let token = Target::parse("/api/v1/namespaces/x/serviceaccounts/default/token")
            .expect("a TokenRequest");
        assert_eq!(token.verb("POST", false), Some(Verb::Create));
        assert_eq!(
            Target::parse("/apis/coordination.k8s.io/v1/namespaces/x/leases/n/status"),
            Err(TargetError::Unknown)
        );
        assert_eq!(
            Target::parse("/api/v1/namespaces/x/nodes"),
            Err(TargetError::Unknown)
        );
        assert_eq!(Target::parse("/healthz"), Err(TargetError::NotAnApiPath));
    }

    #[test]
    fn verbs_follow_method_name_and_watch_flag() {
        let collection = Target::parse("/api/v1/pods").expect("pods");
        assert_eq!(collection.verb("GET", false), Some(Verb::List));
        assert_eq!(collection.verb("GET", true), Some(Verb::Watch));
        assert_eq!(collection.verb("POST", false), Some(Verb::Create));
        assert_eq!(collection.verb("PUT", false), None);
    }
}
