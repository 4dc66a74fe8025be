//! The stats and RemoveImage messages checked on the wire, field number by field number:
//! answers built by hand as the Go CRI server sends them are decoded and turned into the
//! port's figures; requests are encoded and walked. The figures containerd leaves out on a
//! test host (writable layer, swap, network, processes) are pinned here.

use nodepulse_actors::ports::{
    ContainerStatsFilter, ContainerUsage, CpuUsage, ImageFsUsage, InterfaceUsage, MemoryUsage,
    NetworkUsage, SandboxMetadata, SandboxStatsFilter, SandboxUsage, SwapUsage,
};
use prost::Message;

use super::wire_tests::{put_bytes, put_varint, text, varint};
use super::*;
use crate::client::stats;

/// A message of varint fields.
fn varints(fields: &[(u32, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(tag, value) in fields {
        put_varint(&mut out, tag, value);
    }
    out
}

/// `UInt64Value { value = 1 }`
fn wrapped(value: u64) -> Vec<u8> {
    varints(&[(1, value)])
}

/// A message of `(tag, payload)` length-delimited fields after `head`'s varints.
fn message(head: &[(u32, u64)], fields: &[(u32, &[u8])]) -> Vec<u8> {
    let mut out = varints(head);
    for &(tag, payload) in fields {
        put_bytes(&mut out, tag, payload);
    }
    out
}

fn container_stats_bytes() -> Vec<u8> {
    let metadata = message(&[(2, 3)], &[(1, b"main")]);
    let label = message(&[], &[(1, b"k"), (2, b"v")]);
    let attributes = message(&[], &[(1, b"c1"), (2, &metadata), (3, &label)]);
    let cpu = message(&[(1, 7)], &[(2, &wrapped(100)), (3, &wrapped(5))]);
    let memory = message(
        &[(1, 8)],
        &[
            (2, &wrapped(11)),
            (3, &wrapped(12)),
            (4, &wrapped(13)),
            (5, &wrapped(14)),
            (6, &wrapped(15)),
            (7, &wrapped(16)),
        ],
    );
    let fs_id = message(&[], &[(1, b"/var/lib/containerd")]);
    let layer = message(
        &[(1, 9)],
        &[(2, &fs_id), (3, &wrapped(17)), (4, &wrapped(18))],
    );
    let swap = message(&[(1, 10)], &[(2, &wrapped(19)), (3, &wrapped(20))]);
    message(
        &[],
        &[
            (1, &attributes),
            (2, &cpu),
            (3, &memory),
            (4, &layer),
            (5, &swap),
        ],
    )
}

fn expected_container() -> ContainerUsage {
    ContainerUsage {
        id: "c1".into(),
        name: "main".into(),
        attempt: 3,
        labels: [("k".to_owned(), "v".to_owned())].into(),
        annotations: Default::default(),
        cpu: Some(CpuUsage {
            timestamp: 7,
            usage_core_nano_seconds: Some(100),
            usage_nano_cores: Some(5),
        }),
        memory: Some(MemoryUsage {
            timestamp: 8,
            working_set_bytes: Some(11),
            available_bytes: Some(12),
            usage_bytes: Some(13),
            rss_bytes: Some(14),
            page_faults: Some(15),
            major_page_faults: Some(16),
        }),
        writable_layer: Some(ImageFsUsage {
            mountpoint: "/var/lib/containerd".into(),
            used_bytes: Some(17),
            inodes_used: Some(18),
        }),
        swap: Some(SwapUsage {
            timestamp: 10,
            available_bytes: Some(19),
            usage_bytes: Some(20),
        }),
    }
}

#[test]
fn container_stats_are_read_from_their_cri_numbers() {
    let wire = message(&[], &[(1, &container_stats_bytes())]);
    let response = ContainerStatsResponse::decode(wire.as_slice()).expect("decodes");
    let usage = stats::container_usage(response.stats.expect("stats"));
    assert_eq!(usage, expected_container());

    let listed = message(
        &[],
        &[(1, &container_stats_bytes()), (1, &container_stats_bytes())],
    );
    let response = ListContainerStatsResponse::decode(listed.as_slice()).expect("decodes");
    assert_eq!(response.stats.len(), 2);
}

#[test]
fn a_figure_the_runtime_leaves_out_is_none_not_zero() {
    let cpu = message(&[(1, 7)], &[]);
    let wire = message(&[], &[(2, &cpu)]);
    let usage = stats::container_usage(ContainerStats::decode(wire.as_slice()).expect("decodes"));
    assert_eq!(
        usage.cpu,
        Some(CpuUsage {
            timestamp: 7,
            usage_core_nano_seconds: None,
            usage_nano_cores: None
        })
    );
    assert_eq!(
        (usage.memory, usage.writable_layer, usage.swap),
        (None, None, None)
    );
}

#[test]
fn pod_sandbox_stats_are_read_from_their_cri_numbers() {
    let metadata = message(&[(4, 1)], &[(1, b"web"), (2, b"u-1"), (3, b"ns")]);
    let attributes = message(&[], &[(1, b"s1"), (2, &metadata)]);
    let cpu = message(&[(1, 1)], &[(2, &wrapped(2))]);
    let memory = message(&[(1, 2)], &[(2, &wrapped(3))]);
    let eth0 = message(
        &[],
        &[
            (1, b"eth0"),
            (2, &wrapped(5)),
            (3, &wrapped(6)),
            (4, &wrapped(7)),
            (5, &wrapped(8)),
        ],
    );
    let lo = message(&[], &[(1, b"lo")]);
    let network = message(&[(1, 4)], &[(2, &eth0), (3, &lo)]);
    let process = message(&[(1, 9)], &[(2, &wrapped(10))]);
    let linux = message(
        &[],
        &[
            (1, &cpu),
            (2, &memory),
            (3, &network),
            (4, &process),
            (5, &container_stats_bytes()),
        ],
    );
    let sandbox = message(&[], &[(1, &attributes), (2, &linux)]);
    let wire = message(&[], &[(1, &sandbox)]);
    let response = PodSandboxStatsResponse::decode(wire.as_slice()).expect("decodes");
    let usage = stats::sandbox_usage(response.stats.expect("stats"));
    let interface = |name: &str| InterfaceUsage {
        name: name.into(),
        ..InterfaceUsage::default()
    };
    assert_eq!(
        usage,
        SandboxUsage {
            id: "s1".into(),
            metadata: SandboxMetadata {
                name: "web".into(),
                uid: "u-1".into(),
                namespace: "ns".into(),
                attempt: 1,
            },
            cpu: Some(CpuUsage {
                timestamp: 1,
                usage_core_nano_seconds: Some(2),
                usage_nano_cores: None,
            }),
            memory: Some(MemoryUsage {
                timestamp: 2,
                working_set_bytes: Some(3),
                ..MemoryUsage::default()
            }),
            network: Some(NetworkUsage {
                timestamp: 4,
                default_interface: Some(InterfaceUsage {
                    rx_bytes: Some(5),
                    rx_errors: Some(6),
                    tx_bytes: Some(7),
                    tx_errors: Some(8),
                    ..interface("eth0")
                }),
                interfaces: vec![interface("lo")],
            }),
            process_count: Some(10),
            containers: vec![expected_container()],
            ..SandboxUsage::default()
        }
    );
    let listed = message(&[], &[(1, &sandbox)]);
    let response = ListPodSandboxStatsResponse::decode(listed.as_slice()).expect("decodes");
    assert_eq!(response.stats.len(), 1);
}

#[test]
fn stats_and_remove_image_requests_put_every_field_at_its_cri_number() {
    let by_id = ContainerStatsRequest {
        container_id: "c1".into(),
    };
    assert_eq!(text(&by_id.encode_to_vec(), &[1]), "c1");
    let filter = ContainerStatsFilter {
        id: Some("c1".into()),
        sandbox_id: Some("s1".into()),
        labels: [("k".to_owned(), "v".to_owned())].into(),
    };
    let listed = ListContainerStatsRequest {
        filter: Some(stats::container_stats_filter(&filter)),
    }
    .encode_to_vec();
    assert_eq!(text(&listed, &[1, 1]), "c1");
    assert_eq!(text(&listed, &[1, 2]), "s1");
    assert_eq!(text(&listed, &[1, 3, 1]), "k");
    assert_eq!(text(&listed, &[1, 3, 2]), "v");

    let sandbox = PodSandboxStatsRequest {
        pod_sandbox_id: "s1".into(),
    };
    assert_eq!(text(&sandbox.encode_to_vec(), &[1]), "s1");
    let filter = SandboxStatsFilter {
        id: Some("s1".into()),
        labels: [("k".to_owned(), "v".to_owned())].into(),
    };
    let listed = ListPodSandboxStatsRequest {
        filter: Some(stats::sandbox_stats_filter(&filter)),
    }
    .encode_to_vec();
    assert_eq!(text(&listed, &[1, 1]), "s1");
    assert_eq!(text(&listed, &[1, 2, 1]), "k");

    let remove = RemoveImageRequest {
        image: Some(crate::client::convert::image_spec("sha256:0123")),
    }
    .encode_to_vec();
    assert_eq!(text(&remove, &[1, 1]), "sha256:0123");
    assert_eq!(
        varint(
            &ProcessUsage {
                timestamp: 3,
                process_count: None
            }
            .encode_to_vec(),
            &[1]
        ),
        3
    );
}
