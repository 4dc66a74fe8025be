//! What the container runtime says it can do (the kubelet's `runtimeState` handlers and
//! features, from CRI `Status`), and the shared view through which the pods' provider asks it
//! before it sends a user namespace or a recursive read-only mount. Only RuntimeProbeActor
//! writes the view, after a good `Status`; readers never block it for long.

use std::sync::{Arc, PoisonError, RwLock};

use crate::ports::{RuntimeFeatures, RuntimeHandler};

/// The runtime's handlers and features as the last good `Status` reported them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeCapabilities {
    /// Empty when the runtime predates the list (containerd 1.6): nothing is supported.
    pub handlers: Vec<RuntimeHandler>,
    pub features: Option<RuntimeFeatures>,
}

/// The kubelet's `HandlerSupportsUserNamespaces` error: the runtime lists handlers, but not
/// the one a pod asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the handler {0:?} is not known")]
pub struct UnknownHandler(pub String);

impl RuntimeCapabilities {
    fn handler(&self, name: &str) -> Option<&RuntimeHandler> {
        self.handlers.iter().find(|handler| handler.name == name)
    }

    /// Whether handler `name` ("" for the default) can run a pod in its own user namespace:
    /// no when the runtime lists no handlers at all, an error when it lists others only.
    pub fn handler_supports_user_namespaces(&self, name: &str) -> Result<bool, UnknownHandler> {
        if self.handlers.is_empty() {
            return Ok(false);
        }
        self.handler(name)
            .map(|handler| handler.supports_user_namespaces)
            .ok_or_else(|| UnknownHandler(name.to_owned()))
    }

    /// Whether handler `name` can make a mount read-only recursively (the kubelet's
    /// `runtimeHandlerSupportsRecursiveReadOnlyMounts`: an unknown handler cannot).
    pub fn handler_supports_recursive_read_only(&self, name: &str) -> bool {
        let supported = self.handler(name);
        if supported.is_none() && !self.handlers.is_empty() {
            tracing::error!(runtime_handler = name, "Unknown runtime handler");
        }
        supported.is_some_and(|handler| handler.supports_recursive_read_only_mounts)
    }
}

/// The capabilities shared with the pods' provider; `None` inside until the first good probe.
#[derive(Debug, Default)]
pub struct CapabilitiesView {
    last: RwLock<Option<Arc<RuntimeCapabilities>>>,
}

impl CapabilitiesView {
    /// The capabilities as last probed; `None` before the runtime first answered ready.
    pub fn get(&self) -> Option<Arc<RuntimeCapabilities>> {
        self.last
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, capabilities: RuntimeCapabilities) {
        let mut last = self.last.write().unwrap_or_else(PoisonError::into_inner);
        if last.as_deref() != Some(&capabilities) {
            *last = Some(Arc::new(capabilities));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(name: &str, userns: bool, rro: bool) -> RuntimeHandler {
        RuntimeHandler {
            name: name.to_owned(),
            supports_recursive_read_only_mounts: rro,
            supports_user_namespaces: userns,
        }
    }

    #[test]
    fn a_runtime_without_handlers_supports_neither_feature() {
        let old = RuntimeCapabilities::default();
        assert_eq!(old.handler_supports_user_namespaces(""), Ok(false));
        assert!(!old.handler_supports_recursive_read_only(""));
    }

    #[test]
    fn each_handler_answers_for_itself_and_an_unknown_one_is_an_error_for_user_namespaces() {
        let runtime = RuntimeCapabilities {
            handlers: vec![handler("", true, false), handler("kata", false, true)],
            features: None,
        };
        assert_eq!(runtime.handler_supports_user_namespaces(""), Ok(true));
        assert_eq!(runtime.handler_supports_user_namespaces("kata"), Ok(false));
        assert_eq!(
            runtime.handler_supports_user_namespaces("gvisor"),
            Err(UnknownHandler("gvisor".to_owned()))
        );
        assert!(!runtime.handler_supports_recursive_read_only(""));
        assert!(runtime.handler_supports_recursive_read_only("kata"));
        assert!(!runtime.handler_supports_recursive_read_only("gvisor"));
    }

    #[test]
    fn the_view_is_empty_until_set() {
        let view = CapabilitiesView::default();
        assert_eq!(view.get(), None);
        view.set(RuntimeCapabilities::default());
        assert_eq!(view.get().as_deref(), Some(&RuntimeCapabilities::default()));
    }
}
