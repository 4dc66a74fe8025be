//! A pod's user namespace at sandbox time, as the kubelet's `GetOrCreateUserNamespaceMappings`
//! decides it: the host's unless `hostUsers: false`; then the runtime handler must say it can
//! (else the kubelet's refusal, which fails the sandbox), and the pod gets its block. The
//! manager is made at the first such pod, from the pods' directories as they are then.

use std::sync::PoisonError;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::ports::UserNamespace;

use super::{
    engine::Engine,
    userns::{IdRange, UsernsManager},
};

/// The kubelet's refusal when the runtime (or the pod's handler) cannot.
fn unsupported(handler: &str) -> String {
    if handler.is_empty() {
        "can't set `spec.hostUsers: false`, runtime does not support user namespaces".to_owned()
    } else {
        format!(
            "can't set `spec.hostUsers: false`, RuntimeClass handler {handler:?} does not support user namespaces"
        )
    }
}

impl Engine {
    /// The user namespace of `pod`'s sandbox and containers on runtime handler `handler`, or
    /// why it cannot have one (the message the sandbox's failure event carries).
    pub(crate) fn user_namespace(&self, pod: &Pod, handler: &str) -> Result<UserNamespace, String> {
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
            Err(error) => return Err(format!("{}: {error}", unsupported(handler))),
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut manager = self
            .user_namespaces
            .manager
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if manager.is_none() {
            let settings = &self.user_namespaces;
            let made = UsernsManager::new(
                &self.settings.root_dir.join("pods"),
                settings.ids_per_pod,
                IdRange::default_for(settings.ids_per_pod),
                settings.max_pods,
            )
            .map_err(|error| format!("user namespace manager: {error}"))?;
            *manager = Some(made);
        }
        let Some(manager) = manager.as_mut() else {
            return Err("user namespace manager: not made".to_owned());
        };
        manager
            .get_or_create(uid)
            .map_err(|error| format!("user namespace: {error}"))
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
