//! `runAsNonRoot`, as the kubelet's `verifyRunAsNonRoot` checks it before CreateContainer: the
//! effective (container over pod) `runAsUser`, else the image's user from ImageStatus — its
//! uid, or a name that cannot be verified, or none at all (root). A violation is the
//! container's `CreateContainerConfigError`, with the kubelet's texts. Pure.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::view::pod_label;

/// The user an image runs as, as the kubelet's `getImageUser` reads ImageStatus: a uid, or
/// else a user name; neither means root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageUser {
    Uid(i64),
    Name(String),
}

impl ImageUser {
    /// From ImageStatus's `uid` and `username` (a missing image or neither field: root).
    pub fn of(uid: Option<i64>, username: &str) -> Self {
        match (uid, username) {
            (Some(uid), _) => Self::Uid(uid),
            (None, name) if !name.is_empty() => Self::Name(name.to_owned()),
            _ => Self::Uid(0),
        }
    }
}

/// The container's `runAsNonRoot` and `runAsUser`, the container's own over the pod's.
fn effective(pod: &Pod, container: &Container) -> (bool, Option<i64>) {
    let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let context = container.security_context.as_ref();
    let non_root = context
        .and_then(|c| c.run_as_non_root)
        .or_else(|| pod_context.and_then(|c| c.run_as_non_root));
    let user = context
        .and_then(|c| c.run_as_user)
        .or_else(|| pod_context.and_then(|c| c.run_as_user));
    (non_root == Some(true), user)
}

/// Whether the image's user matters: `runAsNonRoot` with no `runAsUser` to go by.
pub fn image_user_decides(pod: &Pod, container: &Container) -> bool {
    let (non_root, user) = effective(pod, container);
    non_root && user.is_none()
}

/// Whether `container` may start as `image` would run it; the kubelet's error text if not.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image: &ImageUser,
) -> Result<(), String> {
    let (non_root, user) = effective(pod, container);
    if !non_root {
        return Ok(());
    }
    let (pod, name) = (pod_label(pod), &container.name);
    match (user, image) {
        (Some(0), _) => Err(format!(
            "container's runAsUser breaks non-root policy (pod: {pod:?}, container: {name})"
        )),
        (Some(_), _) => Ok(()),
        (None, ImageUser::Name(user)) => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {name})"
        )),
        (None, ImageUser::Uid(0)) => Err(format!(
            "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {name})"
        )),
        (None, ImageUser::Uid(uid)) if !(0..=i64::from(i32::MAX)).contains(uid) => Err(format!(
            "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be 1-({})): must be between 0 and {}, inclusive (pod: {pod:?}, container: {name})",
            i32::MAX,
            i32::MAX
        )),
        (None, ImageUser::Uid(_)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod(pod_context: Value, container_context: Value) -> (Pod, Container) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "securityContext": pod_context,
                "containers": [{"name": "app", "securityContext": container_context}],
            },
        }))
        .expect("a pod");
        let container = pod.spec.as_ref().expect("spec").containers[0].clone();
        (pod, container)
    }

    #[test]
    fn run_as_non_root_follows_the_kubelets_rules_and_texts() {
        let root = ImageUser::of(None, "");
        let named = ImageUser::of(None, "robot");
        let user = ImageUser::of(Some(1234), "");
        let cases: &[(Value, Value, &ImageUser, Result<(), &str>)] = &[
            (json!({}), json!({"runAsUser": 0}), &root, Ok(())),
            (
                json!({"runAsNonRoot": true}),
                json!({"runAsUser": 0}),
                &user,
                Err(
                    "container's runAsUser breaks non-root policy (pod: \"p_ns(u-1)\", container: app)",
                ),
            ),
            (
                json!({"runAsUser": 0}),
                json!({"runAsNonRoot": true}),
                &user,
                Err(
                    "container's runAsUser breaks non-root policy (pod: \"p_ns(u-1)\", container: app)",
                ),
            ),
            (
                json!({"runAsNonRoot": true}),
                json!({"runAsUser": 1000}),
                &root,
                Ok(()),
            ),
            (
                json!({"runAsNonRoot": true}),
                json!({}),
                &root,
                Err(
                    "container has runAsNonRoot and image will run as root (pod: \"p_ns(u-1)\", container: app)",
                ),
            ),
            (
                json!({}),
                json!({"runAsNonRoot": true}),
                &named,
                Err(
                    "container has runAsNonRoot and image has non-numeric user (robot), cannot verify user is non-root (pod: \"p_ns(u-1)\", container: app)",
                ),
            ),
            (json!({}), json!({"runAsNonRoot": true}), &user, Ok(())),
            // The container's own `false` overrides the pod's `true`.
            (
                json!({"runAsNonRoot": true}),
                json!({"runAsNonRoot": false}),
                &root,
                Ok(()),
            ),
        ];
        for (pod_context, container_context, image, expected) in cases {
            let (pod, container) = pod(pod_context.clone(), container_context.clone());
            let got = verify_run_as_non_root(&pod, &container, image);
            assert_eq!(
                got,
                expected.map_err(str::to_owned),
                "pod {pod_context}, container {container_context}, image {image:?}"
            );
        }
    }

    #[test]
    fn an_image_with_a_uid_and_a_name_is_judged_by_its_uid() {
        assert_eq!(ImageUser::of(Some(7), "robot"), ImageUser::Uid(7));
        assert_eq!(ImageUser::of(None, ""), ImageUser::Uid(0));
    }
}
