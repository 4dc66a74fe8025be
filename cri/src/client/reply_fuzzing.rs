//! The fuzz target's way in (`fuzz/fuzz_targets/cri_replies.rs`): bytes a runtime could send,
//! decoded as the reply a selector byte names and turned into nodepulse's types as its call
//! does. A reply that does not decode is an error for the call; none may panic.

use prost::Message;

use super::{convert, events, proto, stats};

/// Decodes `bytes` as reply number `selector` (modulo the replies there are) and converts it.
#[doc(hidden)]
pub fn read_reply(selector: u8, bytes: &[u8]) {
    match selector % 14 {
        0 => decoded::<proto::ContainerStatusResponse>(bytes, |reply| {
            reply.status.map(convert::container_status);
        }),
        1 => decoded::<proto::ListContainersResponse>(bytes, |reply| {
            reply.containers.into_iter().for_each(|c| {
                convert::container_summary(c);
            });
        }),
        2 => decoded::<proto::PodSandboxStatusResponse>(bytes, |reply| {
            reply.status.map(convert::sandbox_status);
        }),
        3 => decoded::<proto::ListPodSandboxResponse>(bytes, |reply| {
            reply.items.into_iter().for_each(|s| {
                convert::sandbox_summary(s);
            });
        }),
        4 => decoded::<proto::ListImagesResponse>(bytes, |reply| {
            reply.images.into_iter().for_each(|i| {
                convert::image_info(i);
            });
        }),
        5 => decoded::<proto::ImageStatusResponse>(bytes, |reply| {
            reply.image.map(convert::image_info);
        }),
        6 => decoded::<proto::ListContainerStatsResponse>(bytes, |reply| {
            reply.stats.into_iter().for_each(|s| {
                stats::container_usage(s);
            });
        }),
        7 => decoded::<proto::ListPodSandboxStatsResponse>(bytes, |reply| {
            reply.stats.into_iter().for_each(|s| {
                stats::sandbox_usage(s);
            });
        }),
        8 => decoded::<proto::ContainerStatsResponse>(bytes, |reply| {
            reply.stats.map(stats::container_usage);
        }),
        9 => decoded::<proto::PodSandboxStatsResponse>(bytes, |reply| {
            reply.stats.map(stats::sandbox_usage);
        }),
        10 => decoded::<proto::ContainerEventResponse>(bytes, |reply| {
            events::event(reply);
        }),
        11 => decoded::<proto::ImageFsInfoResponse>(bytes, |reply| {
            reply.image_filesystems.into_iter().for_each(|fs| {
                super::filesystem_usage(fs);
            });
        }),
        12 => decoded::<proto::StatusResponse>(bytes, drop),
        _ => decoded::<proto::ExecSyncResponse>(bytes, drop),
    }
}

fn decoded<Reply: Message + Default>(bytes: &[u8], read: impl FnOnce(Reply)) {
    if let Ok(reply) = Reply::decode(bytes) {
        read(reply);
    }
}
