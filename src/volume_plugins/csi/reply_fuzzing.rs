//! The fuzz target's way in (`fuzz/fuzz_targets/csi_replies.rs`): bytes a CSI driver could
//! send, decoded as the reply a selector byte names (the registration's `GetInfo`, then the
//! node service's) and read as nodepulse reads it. None may panic.

use prost::Message;

use super::{proto, registration, registration_proto};

/// Decodes `bytes` as reply number `selector` (modulo the replies there are) and reads it.
#[doc(hidden)]
pub fn read_reply(selector: u8, bytes: &[u8]) {
    match selector % 3 {
        0 => {
            if let Ok(info) = registration_proto::PluginInfo::decode(bytes) {
                registration::highest_supported_version(&info.supported_versions);
            }
        }
        1 => {
            if let Ok(info) = proto::NodeGetInfoResponse::decode(bytes) {
                let segments = info.accessible_topology.map(|t| t.segments.into_iter());
                let _: std::collections::BTreeMap<_, _> = segments.into_iter().flatten().collect();
            }
        }
        _ => {
            if let Ok(reply) = proto::NodeGetCapabilitiesResponse::decode(bytes) {
                let _ = reply.capabilities.iter().any(|c| c.rpc.is_some());
            }
        }
    }
}
