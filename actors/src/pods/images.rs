//! The kubelet's image manager (`images/image_manager.go`) as decisions and texts: whether to
//! ask the runtime's ImageStatus and PullImage for a container, the per-pod pull back-off
//! (10 s doubling to 300 s), the waiting reasons and messages, and the events around a pull.
//! No I/O: the engine makes the CRI calls in between and records what these functions return.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ImageVolumeSource};

use super::image_ref::parse_image_name;
pub use super::image_ref::with_default_tag;
pub use super::pull_backoff::PullBackoff;
use crate::{go_duration::go_duration, ports::PodEvent};

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// The container's policy; when unset, the API server's default (see [`Self::parse`]).
    pub fn of(container: &Container) -> Self {
        Self::parse(
            container.image_pull_policy.as_deref(),
            container.image.as_deref().unwrap_or_default(),
        )
    }

    /// `policy` as given for `image`; when unset, the API server's default: `Always` for a
    /// `latest` (or untagged, undigested) image, else `IfNotPresent`.
    pub fn parse(policy: Option<&str>, image: &str) -> Self {
        match policy {
            Some("Always") => Self::Always,
            Some("Never") => Self::Never,
            Some("IfNotPresent") => Self::IfNotPresent,
            _ => {
                let latest =
                    parse_image_name(image).is_ok_and(|name| name.tag.as_deref() == Some("latest"));
                if latest {
                    Self::Always
                } else {
                    Self::IfNotPresent
                }
            }
        }
    }

    /// Whether the runtime's ImageStatus must be asked first (`Always` pulls regardless).
    pub fn checks_presence(self) -> bool {
        self != Self::Always
    }
}

/// An image to make present, as the kubelet's `EnsureImageExists` is asked for one: a
/// container's image, or an image volume's reference, with its pull policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRequest<'a> {
    /// As the pod spec names it.
    pub image: &'a str,
    pub policy: PullPolicy,
}

impl<'a> ImageRequest<'a> {
    pub fn of_container(container: &'a Container) -> Self {
        Self {
            image: container.image.as_deref().unwrap_or_default(),
            policy: PullPolicy::of(container),
        }
    }

    pub fn of_volume(source: &'a ImageVolumeSource) -> Self {
        let image = source.reference.as_deref().unwrap_or_default();
        Self {
            image,
            policy: PullPolicy::parse(source.pull_policy.as_deref(), image),
        }
    }
}

/// What to do for a container's image once its presence is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullStep {
    /// Use the image the runtime has (its id); record the event.
    Present { image_ref: String, event: PodEvent },
    /// Call PullImage for this reference (the spec's image with the default tag), first
    /// recording the `Pulling` event.
    Pull { image: String, event: PodEvent },
    /// The container cannot start: the waiting reason and message, and the events.
    Fail(ImageFailure),
}

/// A container held back by its image: waiting `reason`/`message`, and the events the kubelet
/// records (the image manager's, then "Error: <reason>" from container start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFailure {
    pub reason: &'static str,
    pub message: String,
    pub events: Vec<PodEvent>,
}

impl ImageFailure {
    fn new(reason: &'static str, message: String, event: PodEvent) -> Self {
        Self {
            reason,
            events: vec![
                event,
                PodEvent::warning("Failed", format!("Error: {reason}")),
            ],
            message,
        }
    }
}

/// Decides the step for `request` of pod `pod_uid`. `present` is ImageStatus's answer for
/// [`with_default_tag`] of the spec's image, asked only when [`PullPolicy::checks_presence`]
/// (`Ok(Some(id))` present, `Ok(None)` absent or not asked, `Err(text)` the call failed);
/// `backoff` is the node's pull back-off at `now`.
pub fn next_step(
    request: ImageRequest<'_>,
    pod_uid: &str,
    present: Result<Option<&str>, &str>,
    backoff: &PullBackoff,
    now: tokio::time::Instant,
) -> PullStep {
    let requested = request.image;
    let image = match with_default_tag(requested) {
        Ok(image) => image,
        Err(error) => {
            let message = format!("Failed to apply default image tag {requested:?}: {error}");
            return PullStep::Fail(ImageFailure::new(
                "InvalidImageName",
                message.clone(),
                PodEvent::warning("InspectFailed", message),
            ));
        }
    };
    let policy = request.policy;
    if policy.checks_presence() {
        match present {
            // The kubelet quotes the (empty) image ref here, not the image: kept as it is.
            Err(error) => {
                let message = format!("Failed to inspect image \"\": {error}");
                return PullStep::Fail(ImageFailure::new(
                    "ImageInspectError",
                    message.clone(),
                    PodEvent::warning("InspectFailed", message),
                ));
            }
            Ok(Some(image_ref)) => {
                // 1.36 (KubeletEnsureSecretPulledImages on) says who may use it; this node
                // verifies no pull credentials, so every present image is usable.
                let message = format!(
                    "Container image {requested:?} already present on machine and can be accessed by the pod"
                );
                return PullStep::Present {
                    image_ref: image_ref.to_owned(),
                    event: PodEvent::normal("Pulled", message),
                };
            }
            Ok(None) if policy == PullPolicy::Never => {
                let message = format!(
                    "Container image {requested:?} is not present with pull policy of Never"
                );
                return PullStep::Fail(ImageFailure::new(
                    "ErrImageNeverPull",
                    message.clone(),
                    PodEvent::warning("ErrImageNeverPull", message),
                ));
            }
            Ok(None) => {}
        }
    }
    if let Some(message) = backoff.waiting_message(pod_uid, &image, now) {
        let event = PodEvent::normal("BackOff", format!("Back-off pulling image {image:?}"));
        return PullStep::Fail(ImageFailure::new("ImagePullBackOff", message, event));
    }
    PullStep::Pull {
        event: PodEvent::normal("Pulling", format!("Pulling image {image:?}")),
        image,
    }
}

/// After a failed PullImage of `image` (as [`PullStep::Pull`] named it): the back-off grows
/// and the container waits with the reason the runtime's error maps to.
pub fn pull_failed(
    image: &str,
    pod_uid: &str,
    error: &str,
    backoff: &mut PullBackoff,
    now: tokio::time::Instant,
) -> ImageFailure {
    let event = PodEvent::warning("Failed", format!("Failed to pull image {image:?}: {error}"));
    // `evalCRIPullErr`: CRI errors that start with a known name get their own reason.
    let (reason, message) = if let Some(rest) = error.strip_prefix("RegistryUnavailable") {
        (
            "RegistryUnavailable",
            format!("image pull failed for {image} because the registry is unavailable{rest}"),
        )
    } else if let Some(rest) = error.strip_prefix("SignatureValidationFailed") {
        (
            "SignatureValidationFailed",
            format!("image pull failed for {image} because the signature validation failed{rest}"),
        )
    } else {
        ("ErrImagePull", error.to_owned())
    };
    backoff.record_failure(pod_uid, image, format!("{reason}: {message}"), now);
    ImageFailure::new(reason, message, event)
}

/// After a successful PullImage: the `Pulled` event with the kubelet's timings (the pull
/// itself, and from the decision including any wait for a serialized puller, both truncated
/// to milliseconds) and size; stale back-off entries are forgotten.
pub fn pull_succeeded(
    image: &str,
    pull: Duration,
    including_waiting: Duration,
    size_bytes: u64,
    backoff: &mut PullBackoff,
    now: tokio::time::Instant,
) -> PodEvent {
    backoff.forget_stale(now);
    PodEvent::normal(
        "Pulled",
        format!(
            "Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size_bytes} bytes.",
            go_duration(pull),
            go_duration(including_waiting)
        ),
    )
}
