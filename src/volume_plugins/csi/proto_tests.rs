//! The CSI messages checked on the wire against bytes worked out by hand from `csi.proto`'s
//! field numbers, so a wrong tag fails here rather than against a driver.

use prost::Message;

use super::*;

#[test]
fn decodes_node_get_info_by_the_csi_field_numbers() {
    let segments_entry = [&[0x0a, 4][..], b"zone", &[0x12, 1], b"a"].concat();
    let topology = [
        &[0x0a, u8::try_from(segments_entry.len()).expect("short")][..],
        &segments_entry,
    ]
    .concat();
    let response = [
        &[0x0a, 6][..],
        b"node-7",
        &[0x10, 16],
        &[0x1a, u8::try_from(topology.len()).expect("short")],
        &topology,
    ]
    .concat();
    let decoded = NodeGetInfoResponse::decode(response.as_slice()).expect("decodes");
    assert_eq!(decoded.node_id, "node-7");
    assert_eq!(decoded.max_volumes_per_node, 16);
    let segments = decoded.accessible_topology.expect("topology").segments;
    assert_eq!(segments.get("zone").map(String::as_str), Some("a"));
}

#[test]
fn decodes_the_stage_capability_inside_its_rpc_oneof() {
    // capabilities (1) { rpc (1) { type (1) = STAGE_UNSTAGE_VOLUME } }
    let response = [0x0a, 4, 0x0a, 2, 0x08, 1];
    let decoded = NodeGetCapabilitiesResponse::decode(response.as_slice()).expect("decodes");
    assert_eq!(
        decoded.capabilities[0].rpc.as_ref().map(|rpc| rpc.r#type),
        Some(node_capability::STAGE_UNSTAGE_VOLUME)
    );
}

#[test]
fn encodes_publish_paths_and_read_only_at_their_tags() {
    let request = NodePublishVolumeRequest {
        volume_id: "v".to_owned(),
        staging_target_path: "/s".to_owned(),
        target_path: "/t".to_owned(),
        volume_capability: Some(VolumeCapability {
            mount: Some(MountVolume {
                fs_type: "ext4".to_owned(),
                mount_flags: Vec::new(),
            }),
            access_mode: Some(AccessMode {
                mode: access_mode::SINGLE_NODE_WRITER,
            }),
        }),
        readonly: true,
        ..NodePublishVolumeRequest::default()
    };
    let mount = [&[0x0a, 4][..], b"ext4"].concat();
    let capability = [&[0x12, 6][..], &mount, &[0x1a, 2, 0x08, 1]].concat();
    let expected = [
        &[0x0a, 1][..],
        b"v",
        &[0x1a, 2],
        b"/s",
        &[0x22, 2],
        b"/t",
        &[0x2a, u8::try_from(capability.len()).expect("short")],
        &capability,
        &[0x30, 1],
    ]
    .concat();
    assert_eq!(request.encode_to_vec(), expected);
}

#[test]
fn access_modes_map_as_the_kubelets() {
    assert_eq!(
        csi_access_mode("ReadWriteOnce"),
        access_mode::SINGLE_NODE_WRITER
    );
    assert_eq!(
        csi_access_mode("ReadWriteOncePod"),
        access_mode::SINGLE_NODE_WRITER
    );
    assert_eq!(
        csi_access_mode("ReadOnlyMany"),
        access_mode::MULTI_NODE_READER_ONLY
    );
    assert_eq!(
        csi_access_mode("ReadWriteMany"),
        access_mode::MULTI_NODE_MULTI_WRITER
    );
    assert_eq!(csi_access_mode("Sometimes"), 0);
}
