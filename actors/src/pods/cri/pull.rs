//! Image pull policy and the kubelet's image error texts (`images/image_manager.go`): which
//! policy a container has, and the waiting reason and message of each way an image can fail.
//! Pure; the worker asks the runtime and keeps the pull back-off.

use k8s_openapi::api::core::v1::Container;

use super::status::StartError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// The tag of an image reference, `None` when it has none (or only a digest).
fn tag(image: &str) -> Option<&str> {
    if image.contains('@') {
        return None;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').map(|(_, tag)| tag)
}

/// `imagePullPolicy`, or the API's default: `Always` for `latest` (or no tag), else
/// `IfNotPresent`.
pub fn pull_policy(container: &Container) -> PullPolicy {
    match container.image_pull_policy.as_deref() {
        Some("Always") => PullPolicy::Always,
        Some("Never") => PullPolicy::Never,
        Some("IfNotPresent") => PullPolicy::IfNotPresent,
        _ => {
            let image = container.image.as_deref().unwrap_or_default();
            let digest = image.contains('@');
            if !digest && tag(image).is_none_or(|tag| tag == "latest") {
                PullPolicy::Always
            } else {
                PullPolicy::IfNotPresent
            }
        }
    }
}

fn error(reason: &str, message: String) -> StartError {
    StartError {
        reason: reason.to_owned(),
        message,
    }
}

pub fn never_pull(image: &str) -> StartError {
    error(
        "ErrImageNeverPull",
        format!("Container image {image:?} is not present with pull policy of Never"),
    )
}

pub fn inspect_failed(image: &str, cause: &str) -> StartError {
    error(
        "ImageInspectError",
        format!("Failed to inspect image {image:?}: {cause}"),
    )
}

pub fn pull_failed(image: &str, cause: &str) -> StartError {
    error(
        "ErrImagePull",
        format!("Failed to pull image {image:?}: {cause}"),
    )
}

pub fn pull_backoff(image: &str, last_error: &str) -> StartError {
    error(
        "ImagePullBackOff",
        format!("Back-off pulling image {image:?}: ErrImagePull: {last_error}"),
    )
}

/// The key of an image's pull back-off: `<podUID>_<image>`.
pub fn backoff_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, policy: Option<&str>) -> Container {
        Container {
            name: "app".to_owned(),
            image: Some(image.to_owned()),
            image_pull_policy: policy.map(str::to_owned),
            ..Container::default()
        }
    }

    #[test]
    fn the_default_policy_is_always_for_latest_or_no_tag_else_if_not_present() {
        assert_eq!(pull_policy(&container("busybox", None)), PullPolicy::Always);
        assert_eq!(
            pull_policy(&container("busybox:latest", None)),
            PullPolicy::Always
        );
        assert_eq!(
            pull_policy(&container("localhost:5000/busybox", None)),
            PullPolicy::Always
        );
        assert_eq!(
            pull_policy(&container("busybox:1", None)),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            pull_policy(&container("busybox@sha256:ab", None)),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            pull_policy(&container("busybox", Some("Never"))),
            PullPolicy::Never
        );
    }

    #[test]
    fn the_never_pull_message_is_the_kubelets() {
        assert_eq!(
            never_pull("nodepulse.test/missing:1").message,
            "Container image \"nodepulse.test/missing:1\" is not present with pull policy of Never"
        );
    }
}
