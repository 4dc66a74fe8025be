//! The isolation a container asks for, as the kubelet turns it into its CRI security context:
//! which seccomp profile wins, what `seccompDefault` changes, where `Localhost` profiles are
//! looked for, AppArmor, SELinux and `procMount`.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::ports::{ProfileKind, SeLinuxOptions, SecurityContext, SecurityProfile};
use serde_json::json;

use super::{
    container::security,
    isolation::{IsolationError, IsolationSettings},
};

fn settings(seccomp_default: bool) -> IsolationSettings {
    IsolationSettings::new(
        Path::new("/var/lib/np"),
        seccomp_default,
        Path::new("/nonexistent"),
    )
}

fn context_of(
    pod: &serde_json::Value,
    seccomp_default: bool,
) -> Result<SecurityContext, IsolationError> {
    let pod: Pod = serde_json::from_value(pod.clone()).expect("a pod");
    let container = pod.spec.as_ref().expect("spec").containers[0].clone();
    security(&pod, &container, &settings(seccomp_default))
}

fn seccomp(pod: &serde_json::Value, seccomp_default: bool) -> SecurityProfile {
    context_of(pod, seccomp_default)
        .expect("a context")
        .seccomp
        .expect("a seccomp profile")
}

#[test]
fn no_profile_is_unconfined_unless_seccomp_default_makes_it_runtime_default() {
    let plain = json!({"spec": {"containers": [{"name": "app"}]}});
    assert_eq!(
        seccomp(&plain, false),
        SecurityProfile::of(ProfileKind::Unconfined)
    );
    assert_eq!(
        seccomp(&plain, true),
        SecurityProfile::of(ProfileKind::RuntimeDefault)
    );
}

#[test]
fn the_containers_profile_wins_over_the_pods() {
    let both = json!({"spec": {
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "app", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}});
    assert_eq!(
        seccomp(&both, true),
        SecurityProfile::of(ProfileKind::Unconfined)
    );
    let pod_only = json!({"spec": {
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "app"}]}});
    assert_eq!(
        seccomp(&pod_only, false),
        SecurityProfile::of(ProfileKind::RuntimeDefault)
    );
}

#[test]
fn a_localhost_profile_is_found_under_the_root_dirs_seccomp_directory() {
    let local = json!({"spec": {"containers": [{"name": "app", "securityContext":
        {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}}]}});
    assert_eq!(
        seccomp(&local, false),
        SecurityProfile {
            kind: ProfileKind::Localhost,
            localhost_ref: "/var/lib/np/seccomp/profiles/audit.json".to_owned(),
        }
    );
}

#[test]
fn a_localhost_profile_without_a_name_is_the_kubelets_config_error() {
    let unnamed = json!({"spec": {"containers": [{"name": "app", "securityContext":
        {"seccompProfile": {"type": "Localhost"}}}]}});
    let error = context_of(&unnamed, false).expect_err("no name");
    assert_eq!(
        error.to_string(),
        "localhostProfile must be set if seccompProfile type is Localhost."
    );
}

#[test]
fn apparmor_comes_from_the_field_or_its_annotation_and_is_absent_otherwise() {
    let annotated = json!({
        "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/app": "localhost/k8s-deny"}},
        "spec": {"containers": [{"name": "app"}]}});
    assert_eq!(
        context_of(&annotated, false).expect("context").apparmor,
        Some(SecurityProfile {
            kind: ProfileKind::Localhost,
            localhost_ref: "k8s-deny".to_owned(),
        })
    );
    let plain = json!({"spec": {"containers": [{"name": "app"}]}});
    assert_eq!(context_of(&plain, false).expect("context").apparmor, None);
}

#[test]
fn selinux_options_of_the_container_replace_the_pods_whole() {
    let both = json!({"spec": {
        "securityContext": {"seLinuxOptions": {"level": "s0:c1,c2", "user": "pod_u"}},
        "containers": [{"name": "app", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]}});
    assert_eq!(
        context_of(&both, false).expect("context").selinux,
        Some(SeLinuxOptions {
            r#type: "spc_t".to_owned(),
            ..SeLinuxOptions::default()
        })
    );
    let pod_only = json!({"spec": {
        "securityContext": {"seLinuxOptions": {"level": "s0:c1,c2"}},
        "containers": [{"name": "app"}]}});
    assert_eq!(
        context_of(&pod_only, false)
            .expect("context")
            .selinux
            .map(|o| o.level),
        Some("s0:c1,c2".to_owned())
    );
}

#[test]
fn proc_mount_default_masks_the_kubelets_paths_and_unmasked_none() {
    let default = json!({"spec": {"containers": [{"name": "app"}]}});
    let context = context_of(&default, false).expect("context");
    assert!(context.masked_paths.contains(&"/proc/kcore".to_owned()));
    assert_eq!(context.masked_paths.len(), 12, "{:?}", context.masked_paths);
    assert_eq!(
        context.readonly_paths,
        [
            "/proc/bus",
            "/proc/fs",
            "/proc/irq",
            "/proc/sys",
            "/proc/sysrq-trigger"
        ]
    );
    let unmasked = json!({"spec": {"hostUsers": false, "containers": [{"name": "app",
        "securityContext": {"procMount": "Unmasked"}}]}});
    let context = context_of(&unmasked, false).expect("context");
    assert!(context.masked_paths.is_empty() && context.readonly_paths.is_empty());
}

#[test]
fn existing_cpu_throttle_directories_are_masked_too() {
    let sys = tempfile::tempdir().expect("a dir");
    std::fs::create_dir_all(sys.path().join("devices/system/cpu/cpu1/thermal_throttle"))
        .expect("dirs");
    std::fs::write(sys.path().join("devices/system/cpu/possible"), "0-1\n").expect("write");
    let settings = IsolationSettings::new(Path::new("/r"), false, sys.path());
    assert_eq!(
        settings.masked_paths.last().map(String::as_str),
        Some("/sys/devices/system/cpu/cpu1/thermal_throttle")
    );
    assert_eq!(settings.masked_paths.len(), 13);
}
