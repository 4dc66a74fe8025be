//! The isolation fields of the sandbox and container security contexts on the wire: seccomp,
//! AppArmor (the field and the deprecated string), SELinux options, masked and read-only
//! paths, each at its `api.proto` number.

use nodepulse_actors::ports::{
    ContainerConfig, ProfileKind, SandboxConfig, SeLinuxOptions, SecurityContext, SecurityProfile,
};
use prost::Message;

use super::{
    CreateContainerRequest, RunPodSandboxRequest,
    wire_tests::{Value, at, fields, text, varint},
};
use crate::client::convert;

fn selinux() -> SeLinuxOptions {
    SeLinuxOptions {
        user: "system_u".into(),
        role: "system_r".into(),
        r#type: "container_t".into(),
        level: "s0:c1,c2".into(),
    }
}

#[test]
fn the_sandbox_carries_selinux_at_2_and_seccomp_at_9() {
    let sandbox = SandboxConfig {
        security: SecurityContext {
            seccomp: Some(SecurityProfile::of(ProfileKind::RuntimeDefault)),
            selinux: Some(selinux()),
            ..SecurityContext::default()
        },
        ..SandboxConfig::default()
    };
    let request = RunPodSandboxRequest {
        config: Some(convert::sandbox_config(&sandbox)),
        runtime_handler: String::new(),
    };
    let wire = request.encode_to_vec();
    // config.linux.security_context
    let context = [1, 8, 2];
    let path = |tail: &[u32]| [&context[..], tail].concat();
    assert_eq!(text(&wire, &path(&[2, 1])), "system_u");
    assert_eq!(text(&wire, &path(&[2, 2])), "system_r");
    assert_eq!(text(&wire, &path(&[2, 3])), "container_t");
    assert_eq!(text(&wire, &path(&[2, 4])), "s0:c1,c2");
    // RuntimeDefault is the enum's 0: a present, empty profile message.
    assert_eq!(at(&wire, &path(&[9])), Value::Bytes(Vec::new()));
}

#[test]
fn the_container_carries_its_profiles_selinux_and_proc_paths() {
    let config = ContainerConfig {
        security: SecurityContext {
            seccomp: Some(SecurityProfile {
                kind: ProfileKind::Localhost,
                localhost_ref: "/var/lib/np/seccomp/deny.json".into(),
            }),
            apparmor: Some(SecurityProfile {
                kind: ProfileKind::Localhost,
                localhost_ref: "k8s-deny".into(),
            }),
            selinux: Some(selinux()),
            masked_paths: vec!["/proc/kcore".into(), "/proc/keys".into()],
            readonly_paths: vec!["/proc/sys".into()],
            ..SecurityContext::default()
        },
        ..ContainerConfig::default()
    };
    let request = CreateContainerRequest {
        pod_sandbox_id: "sb".into(),
        config: Some(convert::container_config(
            &config,
            &SandboxConfig::default(),
            None,
        )),
        sandbox_config: None,
    };
    let wire = request.encode_to_vec();
    // config.linux.security_context
    let context = [2, 15, 2];
    let path = |tail: &[u32]| [&context[..], tail].concat();
    assert_eq!(text(&wire, &path(&[4, 3])), "container_t");
    assert_eq!(text(&wire, &path(&[4, 4])), "s0:c1,c2");
    assert_eq!(varint(&wire, &path(&[15, 1])), 2, "Localhost");
    assert_eq!(
        text(&wire, &path(&[15, 2])),
        "/var/lib/np/seccomp/deny.json"
    );
    assert_eq!(varint(&wire, &path(&[16, 1])), 2, "Localhost");
    assert_eq!(text(&wire, &path(&[16, 2])), "k8s-deny");
    assert_eq!(text(&wire, &path(&[9])), "localhost/k8s-deny");
    let Value::Bytes(security) = at(&wire, &context) else {
        panic!("no security context");
    };
    let strings = |tag: u32| -> Vec<String> {
        fields(&security)
            .into_iter()
            .filter(|(t, _)| *t == tag)
            .map(|(_, value)| match value {
                Value::Bytes(bytes) => String::from_utf8(bytes).expect("utf-8"),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(strings(13), ["/proc/kcore", "/proc/keys"]);
    assert_eq!(strings(14), ["/proc/sys"]);
}

#[test]
fn stdin_stdin_once_and_tty_are_12_13_and_14() {
    let config = ContainerConfig {
        stdin: true,
        stdin_once: true,
        tty: true,
        ..ContainerConfig::default()
    };
    let wire = convert::container_config(&config, &SandboxConfig::default(), None).encode_to_vec();
    assert_eq!(
        (
            varint(&wire, &[12]),
            varint(&wire, &[13]),
            varint(&wire, &[14])
        ),
        (1, 1, 1)
    );
}

#[test]
fn unconfined_is_1_and_no_apparmor_sends_neither_form() {
    let config = ContainerConfig {
        security: SecurityContext {
            seccomp: Some(SecurityProfile::of(ProfileKind::Unconfined)),
            ..SecurityContext::default()
        },
        ..ContainerConfig::default()
    };
    let linux = convert::container_config(&config, &SandboxConfig::default(), None)
        .linux
        .expect("linux");
    let security = linux.security_context.expect("security");
    let wire = security.encode_to_vec();
    assert_eq!(varint(&wire, &[15, 1]), 1, "Unconfined");
    assert!(
        fields(&wire).iter().all(|(tag, _)| ![9, 16].contains(tag)),
        "no AppArmor field: the runtime's default applies"
    );
}
