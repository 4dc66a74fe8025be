//! The shared view of what the container runtime says it can do (the kubelet's
//! `runtimeState` handlers and features, from CRI `Status`), through which the pods' provider
//! asks before it sends a user namespace or a recursive read-only mount. Only
//! RuntimeProbeActor writes it, after a good `Status`; readers never block it for long.

use std::sync::{Arc, PoisonError, RwLock};

use crate::ports::RuntimeCapabilities;

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
    use crate::ports::{RuntimeHandler, UnknownHandler};

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
