//! A pod's user namespace at sandbox time, as the kubelet's `GetOrCreateUserNamespaceMappings`
//! decides it: the host's unless `hostUsers: false`; then the runtime handler must say it can
//! (else the kubelet's refusal, which fails the sandbox), and the pod gets its block. The
//! manager is made at the first such pod, from the pods' directories as they are then.

use std::sync::PoisonError;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::ports::{UnknownHandler, UserNamespace};

use super::{
    engine::Engine,
    userns::{IdRange, UsernsError, UsernsManager},
};

/// Why a `hostUsers: false` pod gets no user namespace: the message its sandbox's failure
/// event carries.
#[derive(Debug, thiserror::Error)]
pub enum UserNamespaceError {
    /// The kubelet's refusal when the runtime (or the pod's handler) cannot.
    #[error("can't set `spec.hostUsers: false`, runtime does not support user namespaces")]
    RuntimeUnsupported,
    #[error(
        "can't set `spec.hostUsers: false`, RuntimeClass handler {0:?} does not support user namespaces"
    )]
    HandlerUnsupported(String),
    /// The runtime does not list the pod's handler at all.
    #[error("{refusal}: {source}")]
    UnknownHandler {
        refusal: Box<UserNamespaceError>,
        #[source]
        source: UnknownHandler,
    },
    #[error("user namespace manager: {0}")]
    Manager(#[source] UsernsError),
    #[error("user namespace: {0}")]
    Allocation(#[source] UsernsError),
}

/// The kubelet's refusal when the runtime (or the pod's handler) cannot.
fn unsupported(handler: &str) -> UserNamespaceError {
    if handler.is_empty() {
        UserNamespaceError::RuntimeUnsupported
    } else {
        UserNamespaceError::HandlerUnsupported(handler.to_owned())
    }
}

impl Engine {
    /// The user namespace of `pod`'s sandbox and containers on runtime handler `handler`, or
    /// why it cannot have one (the message the sandbox's failure event carries).
    pub(crate) fn user_namespace(
        &self,
        pod: &Pod,
        handler: &str,
    ) -> Result<UserNamespace, UserNamespaceError> {
        let host_users = pod.spec.as_ref().and_then(|spec| spec.host_users);
        if host_users != Some(false) {
            return Ok(UserNamespace::Node);
        }
        // Before the first probe the runtime state is empty, as the kubelet's: refused, and
        // tried again after the sync back-off.
        let capabilities = (self.capabilities.as_ref())
            .and_then(|view| view.get())
            .unwrap_or_default();
        match capabilities.handler_supports_user_namespaces(handler) {
            Ok(true) => {}
            Ok(false) => return Err(unsupported(handler)),
            Err(source) => {
                return Err(UserNamespaceError::UnknownHandler {
                    refusal: Box::new(unsupported(handler)),
                    source,
                });
            }
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut manager = self
            .user_namespaces
            .manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let manager = match &mut *manager {
            Some(manager) => manager,
            empty => {
                let settings = &self.user_namespaces;
                let made = UsernsManager::new(
                    &self.settings.root_dir.join("pods"),
                    settings.ids_per_pod,
                    IdRange::default_for(settings.ids_per_pod),
                    settings.max_pods,
                )
                .map_err(UserNamespaceError::Manager)?;
                empty.insert(made)
            }
        };
        manager
            .get_or_create(uid)
            .map_err(UserNamespaceError::Allocation)
    }

    /// Whether runtime handler `handler` can make mounts read-only recursively (none can
    /// before the first probe, or without the runtime's word).
    pub(crate) fn supports_recursive_read_only(&self, handler: &str) -> bool {
        (self.capabilities.as_ref())
            .and_then(|view| view.get())
            .is_some_and(|capabilities| capabilities.handler_supports_recursive_read_only(handler))
    }

    /// Frees the blocks of pods neither `known` (to the engine or the runtime) nor on disk
    /// (the kubelet's `CleanupOrphanedPodUsernsAllocations`, run at its pod clean-ups).
    pub(crate) fn cleanup_user_namespaces(&self, known: &[&str]) {
        let mut manager = self
            .user_namespaces
            .manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(Err(error)) = manager.as_mut().map(|m| m.cleanup_orphans(known)) {
            tracing::warn!(%error, "user namespace clean-up failed");
        }
    }

    /// Frees the block of a pod that is gone (the kubelet's `Release`).
    pub(crate) fn release_user_namespace(&self, uid: &str) {
        let mut manager = self
            .user_namespaces
            .manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(manager) = manager.as_mut() {
            manager.release(uid);
        }
    }
}
