//! The cluster's RuntimeClasses as the kubelet's RuntimeClass manager holds them: one watch per
//! API client of `node.k8s.io/v1` RuntimeClasses, kept as name → handler, read when a pod's
//! sandbox is made (`LookupRuntimeHandler`).

/// Why a pod's RuntimeClass names no handler; the texts are the kubelet's, shown in its
/// `FailedCreatePodSandBox` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeClassError {
    /// The lister's NotFound, as client-go words it.
    #[error("runtimeclass.node.k8s.io \"{0}\" not found")]
    NotFound(String),
    /// The watch has not listed the RuntimeClasses yet: a later sync looks again.
    #[error("failed to lookup RuntimeClass {0}: the RuntimeClasses are not listed yet")]
    NotListed(String),
}

/// The cluster's RuntimeClasses, as the watch has them so far.
pub trait RuntimeClassLister: Send + Sync + 'static {
    /// Whether the RuntimeClasses were listed at least once.
    fn has_synced(&self) -> bool;
    /// The handler of RuntimeClass `name`, if the watch has it.
    fn handler(&self, name: &str) -> Option<String>;
}

/// The kubelet's `LookupRuntimeHandler`: the handler for `runtime_class_name` (empty for no
/// class, the runtime's default); a class the lister lacks is an error.
pub fn lookup_runtime_handler(
    lister: Option<&dyn RuntimeClassLister>,
    runtime_class_name: Option<&str>,
) -> Result<String, RuntimeClassError> {
    let Some(name) = runtime_class_name.filter(|name| !name.is_empty()) else {
        return Ok(String::new());
    };
    let Some(lister) = lister else {
        // No API server: no class can be found, as the kubelet's empty lister finds none.
        return Err(RuntimeClassError::NotFound(name.to_owned()));
    };
    if !lister.has_synced() {
        return Err(RuntimeClassError::NotListed(name.to_owned()));
    }
    lister
        .handler(name)
        .ok_or_else(|| RuntimeClassError::NotFound(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    struct Listed(bool, BTreeMap<&'static str, &'static str>);

    impl RuntimeClassLister for Listed {
        fn has_synced(&self) -> bool {
            self.0
        }
        fn handler(&self, name: &str) -> Option<String> {
            self.1.get(name).map(|h| (*h).to_owned())
        }
    }

    #[test]
    fn a_pod_without_a_class_gets_the_default_handler_and_a_known_class_its_own() {
        let listed = Listed(true, BTreeMap::from([("gvisor", "runsc")]));
        assert_eq!(
            lookup_runtime_handler(Some(&listed), None),
            Ok(String::new())
        );
        assert_eq!(lookup_runtime_handler(None, Some("")), Ok(String::new()));
        assert_eq!(
            lookup_runtime_handler(Some(&listed), Some("gvisor")),
            Ok("runsc".to_owned())
        );
    }

    #[test]
    fn a_missing_class_is_the_listers_not_found() {
        let listed = Listed(true, BTreeMap::new());
        let error = lookup_runtime_handler(Some(&listed), Some("kata")).expect_err("missing");
        assert_eq!(
            error.to_string(),
            "runtimeclass.node.k8s.io \"kata\" not found"
        );
        assert_eq!(
            lookup_runtime_handler(Some(&Listed(false, BTreeMap::new())), Some("kata")),
            Err(RuntimeClassError::NotListed("kata".to_owned()))
        );
    }
}
