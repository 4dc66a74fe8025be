//! A container's image, the kubelet's `EnsureImageExists`: ImageStatus when the pull policy
//! asks for it, PullImage with the pod's `imagePullSecrets` as CRI auth, and the per-pod pull
//! back-off — the decisions and texts are `pods::images`'; this file makes the CRI calls in
//! between and records the events (Pulling, Pulled, Failed, BackOff) in order.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::time::Instant;

use super::{
    backoff::later,
    engine::{Engine, SYNC_ERROR_BACKOFF},
    non_root::{ImageUser, image_user_decides, verify_run_as_non_root},
    objects::pull_secrets,
    worker::{Failure, failure},
};
use nodepulse_actors::{
    pods::{
        image_ref::parse_image_name,
        images::{
            ImageFailure, ImageRequest, PullStep, next_step, pull_failed, pull_succeeded,
            with_default_tag,
        },
        pull_auth::{PullSecretError, pull_auths},
    },
    ports::{ContainerRuntimeError, SandboxConfig},
};

/// Why an image could not be pulled; the kubelet's pull back-off decides when to try again.
#[derive(Debug, thiserror::Error)]
enum PullError {
    /// A pull secret of the pod cannot be read as credentials.
    #[error(transparent)]
    Secret(#[from] PullSecretError),
    /// The runtime's PullImage failed (with the last credential tried).
    #[error(transparent)]
    Runtime(#[from] ContainerRuntimeError),
}

impl Engine {
    /// The image reference to create a container (or mount an image volume) from, or why it
    /// cannot start yet.
    pub(super) async fn ensure_image(
        &self,
        pod: &Arc<Pod>,
        request: ImageRequest<'_>,
        sandbox: &SandboxConfig,
    ) -> Result<String, Failure> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let requested = request.image;
        let image = with_default_tag(requested).unwrap_or_else(|_| requested.to_owned());
        let present: Result<Option<String>, String> = if request.policy.checks_presence() {
            self.runtime
                .image_status(image.clone())
                .await
                .map(|info| info.map(|info| info.id))
                .map_err(|error| error.to_string())
        } else {
            Ok(None)
        };
        let present = match &present {
            Ok(id) => Ok(id.as_deref()),
            Err(error) => Err(error.as_str()),
        };
        let step = next_step(request, uid, present, &self.core().pulls, Instant::now());
        match step {
            PullStep::Present { image_ref, event } => {
                self.event(pod, event);
                Ok(image_ref)
            }
            PullStep::Fail(failed) => Err(self.image_failure(pod, &image, failed)),
            PullStep::Pull { image, event } => {
                self.event(pod, event);
                self.wake();
                let started = Instant::now();
                match self.pull(pod, &image, sandbox).await {
                    Ok(reference) => {
                        let elapsed = started.elapsed();
                        let size = self.image_size(&reference).await;
                        let event = pull_succeeded(
                            &image,
                            elapsed,
                            elapsed,
                            size,
                            &mut self.core().pulls,
                            Instant::now(),
                        );
                        self.event(pod, event);
                        Ok(reference)
                    }
                    Err(error) => {
                        let failed = pull_failed(
                            &image,
                            uid,
                            &error.to_string(),
                            &mut self.core().pulls,
                            Instant::now(),
                        );
                        Err(self.image_failure(pod, &image, failed))
                    }
                }
            }
        }
    }

    /// Records the failure's events; the container retries when the pull back-off ends.
    fn image_failure(&self, pod: &Arc<Pod>, image: &str, failed: ImageFailure) -> Failure {
        for event in failed.events {
            self.event(pod, event);
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let now = Instant::now();
        let wait = self
            .core()
            .pulls
            .retry_at(uid, image, now)
            .map_or(SYNC_ERROR_BACKOFF, |at| at.saturating_duration_since(now));
        failure(failed.reason, failed.message, later(self.now(), wait))
    }

    /// PullImage with each matching pull credential in turn (anonymously when none matches);
    /// the last error when every one fails.
    async fn pull(
        &self,
        pod: &Arc<Pod>,
        image: &str,
        sandbox: &SandboxConfig,
    ) -> Result<String, PullError> {
        let secrets = pull_secrets(self.objects.as_ref(), pod).await;
        let repository = parse_image_name(image)
            .map(|name| name.repository)
            .unwrap_or_default();
        let mut auths = pull_auths(&repository, &secrets)?.into_iter();
        let pull = |auth| {
            self.runtime
                .pull_image(image.to_owned(), auth, Some(sandbox.clone()))
        };
        let mut result = pull(auths.next()).await;
        for auth in auths {
            if result.is_ok() {
                break;
            }
            result = pull(Some(auth)).await;
        }
        Ok(result?)
    }

    /// `runAsNonRoot` against the user `image_ref` runs as (asked of ImageStatus only when
    /// the pod's own `runAsUser` does not decide); the kubelet's message when it may not start.
    pub(super) async fn verify_non_root(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
        image_ref: &str,
    ) -> Result<(), String> {
        let root = ImageUser::of(None, "");
        if !image_user_decides(pod, container) {
            return verify_run_as_non_root(pod, container, &root);
        }
        let user = match self.runtime.image_status(image_ref.to_owned()).await {
            Ok(Some(info)) => ImageUser::of(info.uid, &info.username),
            Ok(None) => root,
            Err(error) => return Err(error.to_string()),
        };
        verify_run_as_non_root(pod, container, &user)
    }

    /// The pulled image's size for the Pulled event (0 when the runtime does not say).
    async fn image_size(&self, reference: &str) -> u64 {
        match self.runtime.image_status(reference.to_owned()).await {
            Ok(Some(info)) => info.size_bytes,
            _ => 0,
        }
    }
}
