//! What the runtime can do, and what nodepulse asks of it, on the wire: `StatusResponse`'s
//! handlers (3) and features (4) as a CRI server sends them, the user namespace at
//! `NamespaceOption.userns_options` (5) and `Mount.recursive_read_only` (8).

use nodepulse_actors::ports::{
    ContainerConfig, IdMapping, Mount, RuntimeFeatures, RuntimeHandler, SandboxConfig,
    UserNamespace,
};
use prost::Message;

use super::{
    wire_tests::{put_bytes, put_varint, text, varint},
    *,
};
use crate::client::convert;

fn handler(name: &str, rro: bool, userns: bool) -> Vec<u8> {
    let mut features = Vec::new();
    put_varint(&mut features, 1, u64::from(rro));
    put_varint(&mut features, 2, u64::from(userns));
    let mut handler = Vec::new();
    put_bytes(&mut handler, 1, name.as_bytes());
    put_bytes(&mut handler, 2, &features);
    handler
}

#[test]
fn status_response_handlers_and_features_decode_by_their_cri_numbers() {
    let mut features = Vec::new();
    put_varint(&mut features, 1, 1);
    put_varint(&mut features, 2, 0);
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &[]);
    put_bytes(&mut response, 3, &handler("", true, false));
    put_bytes(&mut response, 3, &handler("kata", false, true));
    put_bytes(&mut response, 4, &features);
    let decoded = StatusResponse::decode(response.as_slice()).expect("decodes");
    let handlers: Vec<RuntimeHandler> = (decoded.runtime_handlers.into_iter())
        .map(convert::runtime_handler)
        .collect();
    assert_eq!(
        handlers,
        [
            RuntimeHandler {
                name: String::new(),
                supports_recursive_read_only_mounts: true,
                supports_user_namespaces: false,
            },
            RuntimeHandler {
                name: "kata".into(),
                supports_recursive_read_only_mounts: false,
                supports_user_namespaces: true,
            },
        ]
    );
    let features = decoded.features.expect("features");
    assert_eq!(
        RuntimeFeatures {
            supplemental_groups_policy: features.supplemental_groups_policy,
            user_namespaces_host_network: features.user_namespaces_host_network,
        },
        RuntimeFeatures {
            supplemental_groups_policy: true,
            user_namespaces_host_network: false,
        }
    );
}

#[test]
fn an_old_runtimes_status_has_no_handlers_and_no_features() {
    let mut response = Vec::new();
    put_bytes(&mut response, 1, &[]);
    let decoded = StatusResponse::decode(response.as_slice()).expect("decodes");
    assert!(decoded.runtime_handlers.is_empty());
    assert_eq!(decoded.features, None);
}

fn pod_userns() -> SandboxConfig {
    let block = IdMapping {
        host_id: 131_072,
        container_id: 0,
        length: 65_536,
    };
    SandboxConfig {
        user_namespace: Some(UserNamespace::Pod {
            uids: vec![block],
            gids: vec![block],
        }),
        ..SandboxConfig::default()
    }
}

#[test]
fn a_pods_user_namespace_goes_to_userns_options_of_the_sandbox_and_its_containers() {
    let sandbox = convert::sandbox_config(&pod_userns()).encode_to_vec();
    // linux (8) . security_context (2) . namespace_options (1) . userns_options (5)
    let userns = [8, 2, 1, 5];
    let at = |tail: &[u32]| [&userns[..], tail].concat();
    // Mode POD is 0, proto3's default: off the wire, as the Go encoder leaves it.
    assert_eq!(varint(&sandbox, &at(&[2, 1])), 131_072, "uids host_id");
    assert_eq!(varint(&sandbox, &at(&[2, 3])), 65_536, "uids length");
    assert_eq!(varint(&sandbox, &at(&[3, 1])), 131_072, "gids host_id");
    let container =
        convert::container_config(&ContainerConfig::default(), &pod_userns(), None).encode_to_vec();
    // linux (15) . security_context (2) . namespace_options (3) . userns_options (5) . uids (2)
    assert_eq!(varint(&container, &[15, 2, 3, 5, 2, 1]), 131_072);

    let host = SandboxConfig {
        user_namespace: Some(UserNamespace::Node),
        ..SandboxConfig::default()
    };
    let wire = convert::sandbox_config(&host).encode_to_vec();
    assert_eq!(varint(&wire, &[8, 2, 1, 5, 1]), 2, "mode NODE");
}

#[test]
fn a_recursive_read_only_mount_sets_field_8() {
    let config = ContainerConfig {
        mounts: vec![Mount {
            container_path: "/data".into(),
            host_path: "/tmp/data".into(),
            readonly: true,
            recursive_read_only: true,
            ..Mount::default()
        }],
        ..ContainerConfig::default()
    };
    let wire = convert::container_config(&config, &SandboxConfig::default(), None).encode_to_vec();
    assert_eq!(text(&wire, &[7, 1]), "/data");
    assert_eq!(varint(&wire, &[7, 8]), 1);
}
