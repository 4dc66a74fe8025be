//! A container's `postStart` hook, run right after StartContainer and before the next container
//! starts (the kubelet's `startContainer` step 4). It has no timeout but the container's own
//! lifetime: it ends when the container stops running or the pod is torn down. A failure kills
//! the container (Killing "FailedPostStartHook") and leaves it waiting with PostStartHookError.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    backoff::later,
    engine::{Ending, Engine, SYNC_ERROR_BACKOFF},
    grace::{MIN_GRACE, grace_left},
    hooks::{FAILED_POST_START_HOOK, HookError, POST_START_HOOK_ERROR},
    worker::{Failure, failure},
};
use nodepulse_actors::ports::{ContainerState, PodEvent};

impl Engine {
    /// Runs `container`'s postStart hook, if any, against the started container `id`.
    pub(super) async fn post_start(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
        id: &str,
    ) -> Result<(), Failure> {
        let Some(handler) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        else {
            return Ok(());
        };
        let run = self.run_hook(pod, container, id, handler, Duration::MAX);
        let outcome = tokio::select! {
            outcome = run => outcome,
            () = self.until_gone(pod, id) => Err(HookError::Cancelled),
        };
        let Err(message) = outcome else {
            return Ok(());
        };
        tracing::info!(container = %container.name, %message, "Failed to execute PostStartHook");
        self.event(
            pod,
            PodEvent::warning(FAILED_POST_START_HOOK, "PostStartHook failed".to_owned()),
        );
        if let Ok(status) = self.runtime.container_status(id.to_owned()).await {
            let grace = grace_left(pod, &Ending::Deleted, self.now()).max(MIN_GRACE);
            let (_, watcher) = tokio::sync::watch::channel(Default::default());
            self.kill_container(
                pod,
                &status,
                grace,
                Some(FAILED_POST_START_HOOK),
                (Vec::new(), watcher),
            )
            .await;
        }
        Err(failure(
            POST_START_HOOK_ERROR,
            message.to_string(),
            later(self.now(), SYNC_ERROR_BACKOFF),
        ))
    }

    /// Resolves once container `id` no longer runs or `pod` is being torn down (or nodepulse
    /// stops), looked at once per relist period.
    async fn until_gone(&self, pod: &Pod, id: &str) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        loop {
            tokio::time::sleep(self.settings.relist_period).await;
            if self.ended_meanwhile(uid) {
                return;
            }
            match self.runtime.container_status(id.to_owned()).await {
                Ok(status) if status.state == ContainerState::Running => {}
                Ok(_) | Err(nodepulse_actors::ports::ContainerRuntimeError::NotFound { .. }) => {
                    return;
                }
                Err(_) => {}
            }
        }
    }
}
