//! AppArmor as the kubelet reads it (`pkg/security/apparmor`): a container's profile from its
//! own field, then the deprecated per-container annotation, then the pod's field; and the
//! admission handler that refuses a pod asking for a confined profile on a host without
//! AppArmor ("Cannot enforce AppArmor: …"). Pure, but for the one host probe at start.

use std::path::Path;

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod};

use super::admission::Rejection;

/// The deprecated per-container annotation: `container.apparmor.security.beta.kubernetes.io/<name>`.
pub const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
const ANNOTATION_RUNTIME_DEFAULT: &str = "runtime/default";
const ANNOTATION_UNCONFINED: &str = "unconfined";
const ANNOTATION_LOCALHOST_PREFIX: &str = "localhost/";
pub const RUNTIME_DEFAULT: &str = "RuntimeDefault";
pub const UNCONFINED: &str = "Unconfined";
pub const LOCALHOST: &str = "Localhost";
/// The kubelet's admission reason for a pod it cannot confine.
pub const NOT_ADMITTED_REASON: &str = "AppArmor";

/// The host cannot enforce AppArmor profiles (the kubelet's validator's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("AppArmor is not enabled on the host")]
pub struct AppArmorDisabled;

/// Whether the host can enforce AppArmor, as the kubelet's validator decides once at start
/// (the forked libcontainer `IsEnabled`): the securityfs directory exists and the module's
/// `enabled` parameter reads `Y`.
pub fn host_support(sys: &Path) -> Result<(), AppArmorDisabled> {
    let enabled = sys.join("kernel/security/apparmor").exists()
        && std::fs::read(sys.join("module/apparmor/parameters/enabled"))
            .is_ok_and(|text| text.len() > 1 && text[0] == b'Y');
    if enabled {
        Ok(())
    } else {
        Err(AppArmorDisabled)
    }
}

fn every_container(pod: &Pod) -> impl Iterator<Item = (&str, Option<&AppArmorProfile>)> {
    let spec = pod.spec.iter();
    let regular = spec
        .clone()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .map(|c| (c.name.as_str(), field(c)));
    let ephemeral = spec
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .map(|c| {
            let profile = c.security_context.as_ref();
            (
                c.name.as_str(),
                profile.and_then(|s| s.app_armor_profile.as_ref()),
            )
        });
    regular.chain(ephemeral)
}

fn field(container: &Container) -> Option<&AppArmorProfile> {
    container
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
}

fn pod_field(pod: &Pod) -> Option<&AppArmorProfile> {
    pod.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .app_armor_profile
        .as_ref()
}

/// The kubelet's `isRequired`: any profile other than unconfined, in a field or (the first
/// annotation with the prefix, as Go's map order gives one) an annotation.
fn is_required(pod: &Pod) -> bool {
    let confined =
        |profile: Option<&AppArmorProfile>| profile.is_some_and(|p| p.type_ != UNCONFINED);
    if confined(pod_field(pod)) || every_container(pod).any(|(_, profile)| confined(profile)) {
        return true;
    }
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .find(|(key, _)| key.starts_with(ANNOTATION_PREFIX))
        .is_some_and(|(_, value)| value != ANNOTATION_UNCONFINED)
}

/// The profile of the container named `container` with its own field (the kubelet's
/// `GetProfile`): its field, its annotation, the pod's field; `None` when none names one.
pub fn profile(
    pod: &Pod,
    container: &str,
    own: Option<&AppArmorProfile>,
) -> Option<AppArmorProfile> {
    own.cloned()
        .or_else(|| annotation_profile(pod, container))
        .or_else(|| pod_field(pod).cloned())
}

/// `getProfileFromPodAnnotations`: an invalid value names no profile.
fn annotation_profile(pod: &Pod, container: &str) -> Option<AppArmorProfile> {
    let key = format!("{ANNOTATION_PREFIX}{container}");
    let value = pod.metadata.annotations.as_ref()?.get(&key)?;
    let (type_, localhost_profile) = match value.as_str() {
        ANNOTATION_RUNTIME_DEFAULT => (RUNTIME_DEFAULT, None),
        ANNOTATION_UNCONFINED => (UNCONFINED, None),
        other => (
            LOCALHOST,
            Some(other.strip_prefix(ANNOTATION_LOCALHOST_PREFIX)?.to_owned()),
        ),
    };
    Some(AppArmorProfile {
        type_: type_.to_owned(),
        localhost_profile,
    })
}

/// The kubelet's AppArmor admit handler: `host` is what [`host_support`] found at start.
pub fn admit(pod: &Pod, host: &Result<(), AppArmorDisabled>) -> Result<(), Rejection> {
    if !is_required(pod) {
        return Ok(());
    }
    let refuse = |error: &str| {
        Rejection::new(
            NOT_ADMITTED_REASON,
            format!("Cannot enforce AppArmor: {error}"),
        )
    };
    host.map_err(|error| refuse(&error.to_string()))?;
    for (name, own) in every_container(pod) {
        let Some(profile) = profile(pod, name, own) else {
            continue;
        };
        let empty = profile
            .localhost_profile
            .as_deref()
            .is_none_or(|name| name.trim().is_empty());
        if profile.type_ == LOCALHOST && empty {
            return Err(refuse(&format!(
                "invalid empty AppArmor profile name: {profile:?}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn no_apparmor() -> Result<(), AppArmorDisabled> {
        Err(AppArmorDisabled)
    }

    #[test]
    fn a_confined_profile_is_refused_on_a_host_without_apparmor_with_the_kubelets_words() {
        let asks = pod(json!({"spec": {"containers": [{"name": "app",
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]}}));
        let rejection = admit(&asks, &no_apparmor()).expect_err("refused");
        assert_eq!(rejection.reason, "AppArmor");
        assert_eq!(
            rejection.message,
            "Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
        assert_eq!(admit(&asks, &Ok(())), Ok(()));
    }

    #[test]
    fn unconfined_or_no_profile_needs_no_apparmor() {
        let unconfined = pod(json!({"spec": {
            "securityContext": {"appArmorProfile": {"type": "Unconfined"}},
            "containers": [{"name": "app"}]}}));
        assert_eq!(admit(&unconfined, &no_apparmor()), Ok(()));
        let plain = pod(json!({"spec": {"containers": [{"name": "app"}]}}));
        assert_eq!(admit(&plain, &no_apparmor()), Ok(()));
        let annotated = pod(json!({
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}},
            "spec": {"containers": [{"name": "app"}]}}));
        assert_eq!(admit(&annotated, &no_apparmor()), Ok(()));
    }

    #[test]
    fn the_annotation_alone_asks_for_apparmor() {
        let annotated = pod(json!({
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "localhost/k8s-deny"}},
            "spec": {"containers": [{"name": "app"}]}}));
        assert!(admit(&annotated, &no_apparmor()).is_err());
    }

    #[test]
    fn the_containers_field_wins_then_its_annotation_then_the_pods_field() {
        let pod = pod(json!({
        "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/b": "localhost/from-note"}},
        "spec": {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                {"name": "b"},
                {"name": "c"},
            ]}}));
        let of = |name: &str| {
            let spec = pod.spec.as_ref().expect("spec");
            let container = spec.containers.iter().find(|c| c.name == name).expect("c");
            profile(&pod, name, field(container)).expect("a profile")
        };
        assert_eq!(of("a").type_, "Unconfined");
        assert_eq!(
            (of("b").type_.as_str(), of("b").localhost_profile.as_deref()),
            ("Localhost", Some("from-note"))
        );
        assert_eq!(of("c").type_, "RuntimeDefault");
    }

    #[test]
    fn an_empty_localhost_name_is_refused_even_where_apparmor_is_enabled() {
        let empty = pod(
            json!({"spec": {"containers": [{"name": "app", "securityContext":
            {"appArmorProfile": {"type": "Localhost", "localhostProfile": " "}}}]}}),
        );
        let rejection = admit(&empty, &Ok(())).expect_err("refused");
        assert!(
            rejection
                .message
                .starts_with("Cannot enforce AppArmor: invalid empty AppArmor profile name"),
            "{rejection}"
        );
    }

    #[test]
    fn this_kind_of_host_is_read_from_sys() {
        let dir = std::env::temp_dir().join(format!("apparmor-sys-{}", std::process::id()));
        let enabled = dir.join("module/apparmor/parameters/enabled");
        std::fs::create_dir_all(enabled.parent().expect("parent")).expect("dirs");
        std::fs::write(&enabled, "Y\n").expect("write");
        assert!(host_support(&dir).is_err(), "no securityfs directory");
        std::fs::create_dir_all(dir.join("kernel/security/apparmor")).expect("dirs");
        assert_eq!(host_support(&dir), Ok(()));
        std::fs::write(&enabled, "N\n").expect("write");
        assert!(host_support(&dir).is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
