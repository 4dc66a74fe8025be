//! The pod messages checked on the wire, field number by field number: requests are encoded
//! and walked with a tiny proto reader; answers are built by hand as the Go CRI server would
//! send them and decoded. A wrong tag in any derive fails here, not against a runtime.

use nodepulse_actors::ports::{
    ContainerConfig, ContainerState, DnsConfig, ImageMount, LinuxResources, Mount, PortMapping,
    Protocol, PullAuth, SandboxConfig, SandboxMetadata, SandboxState, SecurityContext,
};
use prost::bytes::Buf;
use prost::{
    Message,
    encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint},
};

use super::*;
use crate::client::convert;

/// One field as read off the wire: a varint or a length-delimited payload.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Varint(u64),
    Bytes(Vec<u8>),
}

/// Every top-level field of `bytes`, in order.
pub(super) fn fields(mut bytes: &[u8]) -> Vec<(u32, Value)> {
    let mut out = Vec::new();
    while bytes.has_remaining() {
        let (tag, wire_type) = decode_key(&mut bytes).expect("key");
        let value = match wire_type {
            WireType::Varint => Value::Varint(decode_varint(&mut bytes).expect("varint")),
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut bytes).expect("len")).expect("len");
                let payload = bytes[..len].to_vec();
                bytes.advance(len);
                Value::Bytes(payload)
            }
            other => panic!("unexpected wire type {other:?}"),
        };
        out.push((tag, value));
    }
    out
}

/// The payload of the first field `tag`, following nested messages along `path`.
pub(super) fn at(bytes: &[u8], path: &[u32]) -> Value {
    let (first, rest) = path.split_first().expect("a path");
    let value = fields(bytes)
        .into_iter()
        .find(|(tag, _)| tag == first)
        .unwrap_or_else(|| panic!("no field {first}"))
        .1;
    match (rest.is_empty(), value) {
        (true, value) => value,
        (false, Value::Bytes(inner)) => at(&inner, rest),
        (false, value) => panic!("field {first} is {value:?}, not a message"),
    }
}

pub(super) fn text(bytes: &[u8], path: &[u32]) -> String {
    match at(bytes, path) {
        Value::Bytes(payload) => String::from_utf8(payload).expect("utf-8"),
        value => panic!("{path:?} is {value:?}"),
    }
}

pub(super) fn varint(bytes: &[u8], path: &[u32]) -> u64 {
    match at(bytes, path) {
        Value::Varint(value) => value,
        value => panic!("{path:?} is {value:?}"),
    }
}

pub(super) fn put_bytes(out: &mut Vec<u8>, tag: u32, payload: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

pub(super) fn put_varint(out: &mut Vec<u8>, tag: u32, value: u64) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(value, out);
}

fn sandbox() -> SandboxConfig {
    SandboxConfig {
        metadata: SandboxMetadata {
            name: "web".into(),
            uid: "u-1".into(),
            namespace: "ns".into(),
            attempt: 2,
        },
        hostname: "web-host".into(),
        log_directory: "/var/log/pods/ns_web_u-1".into(),
        dns: Some(DnsConfig {
            servers: vec!["198.18.0.10".into()],
            searches: vec!["ns.svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: vec![PortMapping {
            protocol: Protocol::Udp,
            container_port: 53,
            host_port: 5353,
            host_ip: "127.0.0.1".into(),
        }],
        labels: [("io.kubernetes.pod.uid".to_owned(), "u-1".to_owned())].into(),
        host_network: true,
        sysctls: [(
            "net.ipv4.ip_unprivileged_port_start".to_owned(),
            "0".to_owned(),
        )]
        .into(),
        ..SandboxConfig::default()
    }
}

#[test]
fn run_pod_sandbox_puts_every_field_at_its_cri_number() {
    let request = RunPodSandboxRequest {
        config: Some(convert::sandbox_config(&sandbox())),
        runtime_handler: "runc".into(),
    };
    let wire = request.encode_to_vec();
    assert_eq!(text(&wire, &[2]), "runc");
    assert_eq!(text(&wire, &[1, 1, 1]), "web");
    assert_eq!(text(&wire, &[1, 1, 2]), "u-1");
    assert_eq!(text(&wire, &[1, 1, 3]), "ns");
    assert_eq!(varint(&wire, &[1, 1, 4]), 2);
    assert_eq!(text(&wire, &[1, 2]), "web-host");
    assert_eq!(text(&wire, &[1, 3]), "/var/log/pods/ns_web_u-1");
    assert_eq!(text(&wire, &[1, 4, 1]), "198.18.0.10");
    assert_eq!(text(&wire, &[1, 4, 2]), "ns.svc.cluster.local");
    assert_eq!(text(&wire, &[1, 4, 3]), "ndots:5");
    assert_eq!(varint(&wire, &[1, 5, 1]), 1, "UDP");
    assert_eq!(varint(&wire, &[1, 5, 2]), 53);
    assert_eq!(varint(&wire, &[1, 5, 3]), 5353);
    assert_eq!(text(&wire, &[1, 5, 4]), "127.0.0.1");
    assert_eq!(text(&wire, &[1, 6, 1]), "io.kubernetes.pod.uid");
    assert_eq!(text(&wire, &[1, 6, 2]), "u-1");
    // linux.security_context.namespace_options: network NODE (2), pid CONTAINER (1).
    assert_eq!(varint(&wire, &[1, 8, 2, 1, 1]), 2);
    assert_eq!(varint(&wire, &[1, 8, 2, 1, 2]), 1);
    assert_eq!(
        text(&wire, &[1, 8, 3, 1]),
        "net.ipv4.ip_unprivileged_port_start"
    );
}

/// (network, pid, ipc, target) of the container's namespace options for `sandbox` and a
/// container whose PID target is `target`, read back from the wire.
fn container_namespaces(sandbox: &SandboxConfig, target: Option<&str>) -> (i32, i32, i32, String) {
    let config = ContainerConfig {
        pid_target: target.map(str::to_owned),
        ..ContainerConfig::default()
    };
    let wire = convert::container_config(&config, sandbox, None).encode_to_vec();
    let decoded = super::ContainerConfig::decode(wire.as_slice()).expect("decodes");
    let options = decoded
        .linux
        .and_then(|linux| linux.security_context)
        .and_then(|security| security.namespace_options)
        .expect("namespace options");
    if target.is_some() && options.pid == NamespaceMode::Target as i32 {
        assert_eq!(
            text(&wire, &[15, 2, 3, 4]),
            options.target_id,
            "target_id is field 4"
        );
    }
    (options.network, options.pid, options.ipc, options.target_id)
}

#[test]
fn namespaces_follow_the_pods_host_and_share_flags_and_an_ephemeral_target() {
    use NamespaceMode::{Container, Node, Pod, Target};
    let modes = |network: NamespaceMode, pid: NamespaceMode, ipc: NamespaceMode, target: &str| {
        (network as i32, pid as i32, ipc as i32, target.to_owned())
    };
    let plain = SandboxConfig::default();
    assert_eq!(
        container_namespaces(&plain, None),
        modes(Pod, Container, Pod, "")
    );
    assert_eq!(
        container_namespaces(&plain, Some("c-1")),
        modes(Pod, Target, Pod, "c-1")
    );
    let shared = SandboxConfig {
        share_process_namespace: true,
        ..SandboxConfig::default()
    };
    // A pod-wide PID namespace already holds the target: no TARGET mode, as the kubelet.
    assert_eq!(
        container_namespaces(&shared, Some("c-1")),
        modes(Pod, Pod, Pod, "")
    );
    let host = SandboxConfig {
        host_network: true,
        host_pid: true,
        host_ipc: true,
        share_process_namespace: true,
        ..SandboxConfig::default()
    };
    assert_eq!(
        container_namespaces(&host, Some("c-1")),
        modes(Node, Node, Node, "")
    );
    let sandbox = convert::sandbox_config(&host);
    let options = sandbox
        .linux
        .and_then(|linux| linux.security_context)
        .and_then(|security| security.namespace_options)
        .expect("the sandbox's namespace options");
    assert_eq!(
        (options.network, options.pid, options.ipc),
        (Node as i32, Node as i32, Node as i32)
    );
}

#[test]
fn create_container_puts_every_field_at_its_cri_number() {
    let config = ContainerConfig {
        name: "main".into(),
        attempt: 1,
        image: "sha256:0123".into(),
        user_specified_image: "nodepulse.test/busybox:1".into(),
        command: vec!["/bin/sh".into()],
        args: vec!["-c".into(), "true".into()],
        working_dir: "/work".into(),
        envs: vec![("GREETING".into(), "hi".into())],
        mounts: vec![Mount {
            container_path: "/out".into(),
            host_path: "/tmp/out".into(),
            readonly: true,
            propagation: nodepulse_actors::ports::MountPropagation::HostToContainer,
            image: None,
            recursive_read_only: false,
        }],
        log_path: "main/1.log".into(),
        resources: Some(LinuxResources {
            memory_limit_in_bytes: 64 << 20,
            oom_score_adj: -997,
            ..LinuxResources::default()
        }),
        security: SecurityContext {
            run_as_user: Some(1000),
            run_as_group: Some(0),
            readonly_rootfs: true,
            add_capabilities: vec!["NET_ADMIN".into()],
            drop_capabilities: vec!["ALL".into()],
            ..SecurityContext::default()
        },
        ..ContainerConfig::default()
    };
    let request = CreateContainerRequest {
        pod_sandbox_id: "sb".into(),
        config: Some(convert::container_config(&config, &sandbox(), Some(0))),
        sandbox_config: Some(convert::sandbox_config(&sandbox())),
    };
    let wire = request.encode_to_vec();
    assert_eq!(text(&wire, &[1]), "sb");
    assert_eq!(text(&wire, &[3, 2]), "web-host");
    assert_eq!(text(&wire, &[2, 1, 1]), "main");
    assert_eq!(varint(&wire, &[2, 1, 2]), 1);
    assert_eq!(text(&wire, &[2, 2, 1]), "sha256:0123");
    assert_eq!(text(&wire, &[2, 2, 18]), "nodepulse.test/busybox:1");
    assert_eq!(text(&wire, &[2, 3]), "/bin/sh");
    assert_eq!(text(&wire, &[2, 4]), "-c");
    assert_eq!(text(&wire, &[2, 5]), "/work");
    assert_eq!(text(&wire, &[2, 6, 1]), "GREETING");
    assert_eq!(text(&wire, &[2, 6, 2]), "hi");
    assert_eq!(text(&wire, &[2, 7, 1]), "/out");
    assert_eq!(text(&wire, &[2, 7, 2]), "/tmp/out");
    assert_eq!(varint(&wire, &[2, 7, 3]), 1);
    assert_eq!(varint(&wire, &[2, 7, 5]), 1, "HostToContainer");
    assert_eq!(text(&wire, &[2, 11]), "main/1.log");
    assert_eq!(varint(&wire, &[2, 15, 1, 4]), 64 << 20);
    // The clamped value travels, not the one asked for; 0 is proto3's default, so absent.
    assert!(
        fields(&match at(&wire, &[2, 15, 1]) {
            Value::Bytes(resources) => resources,
            value => panic!("{value:?}"),
        })
        .iter()
        .all(|(tag, _)| *tag != 5)
    );
    assert_eq!(text(&wire, &[2, 15, 2, 1, 1]), "NET_ADMIN");
    assert_eq!(text(&wire, &[2, 15, 2, 1, 2]), "ALL");
    assert_eq!(varint(&wire, &[2, 15, 2, 5, 1]), 1000);
    // run_as_group 0 (root) is sent as a present but empty Int64Value at 12.
    assert_eq!(at(&wire, &[2, 15, 2, 12]), Value::Bytes(Vec::new()));
    assert_eq!(varint(&wire, &[2, 15, 2, 7]), 1);
}

#[test]
fn an_image_volume_mount_carries_its_image_at_9_and_its_sub_path_at_10() {
    let config = ContainerConfig {
        mounts: vec![Mount {
            container_path: "/volume".into(),
            readonly: true,
            image: Some(ImageMount {
                image: "sha256:cafe".into(),
                user_specified_image: "nodepulse.test/kitten:1".into(),
                annotations: [("team".to_owned(), "a".to_owned())].into(),
                sub_path: "etc".into(),
            }),
            ..Mount::default()
        }],
        ..ContainerConfig::default()
    };
    let proto = convert::container_config(&config, &SandboxConfig::default(), None);
    let wire = proto.encode_to_vec();
    let mount = match at(&wire, &[7]) {
        Value::Bytes(mount) => mount,
        value => panic!("{value:?}"),
    };
    assert_eq!(text(&mount, &[1]), "/volume");
    assert!(
        fields(&mount).iter().all(|(tag, _)| *tag != 2),
        "no host path beside an image"
    );
    assert_eq!(varint(&mount, &[3]), 1, "read-only");
    assert_eq!(text(&mount, &[9, 1]), "sha256:cafe");
    assert_eq!(text(&mount, &[9, 18]), "nodepulse.test/kitten:1");
    assert_eq!(text(&mount, &[9, 2, 1]), "team");
    assert_eq!(text(&mount, &[9, 2, 2]), "a");
    assert_eq!(text(&mount, &[10]), "etc");
    // A runtime that reports the mount back the same way gives the same mount.
    let mut status = Vec::new();
    put_bytes(&mut status, 14, &mount);
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &status);
    let decoded = ContainerStatusResponse::decode(response.as_slice()).expect("decodes");
    let status = convert::container_status(decoded.status.expect("a status"));
    assert_eq!(status.mounts, config.mounts);
}

#[test]
fn a_negative_oom_score_adj_is_encoded_as_int64() {
    let config = ContainerConfig {
        resources: Some(LinuxResources::default()),
        ..ContainerConfig::default()
    };
    let proto = convert::container_config(&config, &SandboxConfig::default(), Some(-997));
    let wire = proto.encode_to_vec();
    assert_eq!(varint(&wire, &[15, 1, 5]) as i64, -997);
}

#[test]
fn decodes_a_container_status_by_the_cri_field_numbers() {
    let mut metadata = Vec::new();
    put_bytes(&mut metadata, 1, b"main");
    put_varint(&mut metadata, 2, 3);
    let mut image = Vec::new();
    put_bytes(&mut image, 1, b"nodepulse.test/busybox:1");
    let mut status = Vec::new();
    put_bytes(&mut status, 1, b"c-1");
    put_bytes(&mut status, 2, &metadata);
    put_varint(&mut status, 3, 2); // CONTAINER_EXITED
    put_varint(&mut status, 4, 10);
    put_varint(&mut status, 5, 20);
    put_varint(&mut status, 6, 30);
    put_varint(&mut status, 7, 1);
    put_bytes(&mut status, 8, &image);
    put_bytes(&mut status, 9, b"sha256:abc");
    put_bytes(&mut status, 10, b"Error");
    put_bytes(&mut status, 11, b"it failed");
    let mut mount = Vec::new();
    put_bytes(&mut mount, 1, b"/dev/termination-log");
    put_bytes(
        &mut mount,
        2,
        b"/var/lib/nodepulse/pods/u/containers/main/0a1b2c3d",
    );
    put_bytes(&mut status, 14, &mount);
    put_bytes(&mut status, 15, b"/var/log/pods/x/main/3.log");
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &status);
    let decoded = ContainerStatusResponse::decode(response.as_slice()).expect("decodes");
    let status = convert::container_status(decoded.status.expect("status"));
    assert_eq!(status.id, "c-1");
    assert_eq!((status.name.as_str(), status.attempt), ("main", 3));
    assert_eq!(status.state, ContainerState::Exited);
    assert_eq!(
        (status.created_at, status.started_at, status.finished_at),
        (10, 20, 30)
    );
    assert_eq!(status.exit_code, 1);
    assert_eq!(status.image, "nodepulse.test/busybox:1");
    assert_eq!(status.image_ref, "sha256:abc");
    assert_eq!(status.reason, "Error");
    assert_eq!(status.message, "it failed");
    assert_eq!(status.log_path.to_str(), Some("/var/log/pods/x/main/3.log"));
    assert_eq!(status.mounts.len(), 1);
    assert_eq!(
        status.mounts[0].container_path.to_str(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        status.mounts[0].host_path.to_str(),
        Some("/var/lib/nodepulse/pods/u/containers/main/0a1b2c3d")
    );
}

#[test]
fn decodes_the_sandbox_ips_primary_first() {
    let mut extra = Vec::new();
    put_bytes(&mut extra, 1, b"fd00::5");
    let mut network = Vec::new();
    put_bytes(&mut network, 1, b"198.18.0.5");
    put_bytes(&mut network, 2, &extra);
    let mut status = Vec::new();
    put_bytes(&mut status, 1, b"sb");
    put_varint(&mut status, 3, 1); // SANDBOX_NOTREADY
    put_bytes(&mut status, 5, &network);
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &status);
    let decoded = PodSandboxStatusResponse::decode(response.as_slice()).expect("decodes");
    let status = convert::sandbox_status(decoded.status.expect("status"));
    assert_eq!(status.ips, ["198.18.0.5", "fd00::5"]);
    assert_eq!(status.state, SandboxState::NotReady);
}

#[test]
fn exec_sync_and_stop_container_carry_their_timeouts_in_seconds() {
    let wire = ExecSyncRequest {
        container_id: "c".into(),
        cmd: vec!["echo".into()],
        timeout: 5,
    }
    .encode_to_vec();
    assert_eq!(text(&wire, &[1]), "c");
    assert_eq!(text(&wire, &[2]), "echo");
    assert_eq!(varint(&wire, &[3]), 5);
    let wire = StopContainerRequest {
        container_id: "c".into(),
        timeout: 30,
    }
    .encode_to_vec();
    assert_eq!(varint(&wire, &[2]), 30);

    let mut response = Vec::new();
    put_bytes(&mut response, 1, b"out");
    put_bytes(&mut response, 2, b"err");
    put_varint(&mut response, 3, 7);
    let decoded = ExecSyncResponse::decode(response.as_slice()).expect("decodes");
    assert_eq!(
        (decoded.stdout.as_slice(), decoded.stderr.as_slice()),
        (&b"out"[..], &b"err"[..])
    );
    assert_eq!(decoded.exit_code, 7);
}

#[test]
fn an_image_status_without_an_image_is_none_and_one_with_it_decodes() {
    let empty = ImageStatusResponse::decode(&[][..]).expect("decodes");
    assert!(empty.image.is_none());
    let mut uid = Vec::new();
    put_varint(&mut uid, 1, 65534);
    let mut image = Vec::new();
    put_bytes(&mut image, 1, b"sha256:abc");
    put_bytes(&mut image, 2, b"nodepulse.test/busybox:1");
    put_varint(&mut image, 4, 1_234_567);
    put_bytes(&mut image, 5, &uid);
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &image);
    let decoded = ImageStatusResponse::decode(response.as_slice()).expect("decodes");
    let info = convert::image_info(decoded.image.expect("image"));
    assert_eq!(info.id, "sha256:abc");
    assert_eq!(info.repo_tags, ["nodepulse.test/busybox:1"]);
    assert_eq!(info.size_bytes, 1_234_567);
    assert_eq!(info.uid, Some(65534));
}

#[test]
fn pull_auth_goes_to_its_fields_and_never_into_a_debug_line() {
    let auth = PullAuth {
        username: "robot".into(),
        password: "hunter2".into(),
        server_address: "registry.test".into(),
        ..PullAuth::default()
    };
    assert!(!format!("{auth:?}").contains("hunter2"));
    let proto = convert::auth_config(auth);
    assert!(!format!("{proto:?}").contains("hunter2"));
    let wire = PullImageRequest {
        image: Some(convert::image_spec("nodepulse.test/busybox:1")),
        auth: Some(proto),
        sandbox_config: None,
    }
    .encode_to_vec();
    assert_eq!(text(&wire, &[1, 1]), "nodepulse.test/busybox:1");
    assert_eq!(text(&wire, &[2, 1]), "robot");
    assert_eq!(text(&wire, &[2, 2]), "hunter2");
    assert_eq!(text(&wire, &[2, 4]), "registry.test");
}

#[test]
fn list_filters_put_id_state_sandbox_and_labels_at_their_cri_numbers() {
    let labels: nodepulse_actors::ports::Labels =
        [("io.kubernetes.pod.uid".to_owned(), "u-1".to_owned())].into();
    let wire = ListContainersRequest {
        filter: Some(convert::container_filter(
            nodepulse_actors::ports::ContainerFilter {
                id: Some("c".into()),
                state: Some(ContainerState::Exited),
                sandbox_id: Some("sb".into()),
                labels: labels.clone(),
            },
        )),
    }
    .encode_to_vec();
    assert_eq!(text(&wire, &[1, 1]), "c");
    assert_eq!(varint(&wire, &[1, 2, 1]), 2, "CONTAINER_EXITED");
    assert_eq!(text(&wire, &[1, 3]), "sb");
    assert_eq!(text(&wire, &[1, 4, 1]), "io.kubernetes.pod.uid");
    assert_eq!(text(&wire, &[1, 4, 2]), "u-1");

    let wire = ListPodSandboxRequest {
        filter: Some(convert::sandbox_filter(
            nodepulse_actors::ports::SandboxFilter {
                id: Some("sb".into()),
                state: Some(SandboxState::NotReady),
                labels,
            },
        )),
    }
    .encode_to_vec();
    assert_eq!(text(&wire, &[1, 1]), "sb");
    assert_eq!(varint(&wire, &[1, 2, 1]), 1, "SANDBOX_NOTREADY");
    assert_eq!(text(&wire, &[1, 3, 1]), "io.kubernetes.pod.uid");
}

#[test]
fn a_container_status_reads_the_applied_linux_resources_at_16_1() {
    let mut linux = Vec::new();
    put_varint(&mut linux, 1, 100_000);
    put_varint(&mut linux, 2, 50_000);
    put_varint(&mut linux, 3, 512);
    put_varint(&mut linux, 4, 209_715_200);
    let mut resources = Vec::new();
    put_bytes(&mut resources, 1, &linux);
    let mut status = Vec::new();
    put_bytes(&mut status, 1, b"c-1");
    put_bytes(&mut status, 16, &resources);
    let decoded = ContainerStatus::decode(status.as_slice()).expect("decodes");
    let applied = convert::container_status(decoded)
        .resources
        .expect("resources");
    assert_eq!(
        (
            applied.cpu_period,
            applied.cpu_quota,
            applied.cpu_shares,
            applied.memory_limit_in_bytes
        ),
        (100_000, 50_000, 512, 209_715_200)
    );
    // An older runtime sends no field 16: nothing applied is known.
    let mut old = Vec::new();
    put_bytes(&mut old, 1, b"c-1");
    let decoded = ContainerStatus::decode(old.as_slice()).expect("decodes");
    assert_eq!(convert::container_status(decoded).resources, None);
}

#[test]
fn update_container_resources_puts_the_id_at_1_and_linux_at_2() {
    let resources = LinuxResources {
        cpu_period: 100_000,
        cpu_quota: 20_000,
        cpu_shares: 205,
        memory_limit_in_bytes: 104_857_600,
        oom_score_adj: 5,
    };
    let request = UpdateContainerResourcesRequest {
        container_id: "c-1".into(),
        linux: Some(convert::linux_resources(&resources, None)),
        annotations: std::collections::HashMap::new(),
    };
    let wire = request.encode_to_vec();
    assert_eq!(text(&wire, &[1]), "c-1");
    assert_eq!(varint(&wire, &[2, 1]), 100_000);
    assert_eq!(varint(&wire, &[2, 2]), 20_000);
    assert_eq!(varint(&wire, &[2, 3]), 205);
    assert_eq!(varint(&wire, &[2, 4]), 104_857_600);
    assert_eq!(varint(&wire, &[2, 5]), 5);
}
