//! `status.images`, as the kubelet's Images setter: the runtime's images largest first (ties by
//! id, descending, as its image cache sorts them), at most 50 (`nodeStatusMaxImages`' default),
//! each named by its repo digests then its repo tags, at most 5 names. The list is the one
//! RuntimeProbeActor last listed; like the kubelet's image cache, it outlives a failed listing.

use k8s_openapi::api::core::v1::{ContainerImage, Node};

use super::{SetterResult, StatusInputs};
use crate::ports::ImageInfo;

/// The kubelet's `nodeStatusMaxImages` default.
pub const MAX_IMAGES: usize = 50;
/// The kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    // Before the first probe there is no list to report; the Node keeps what it has.
    let Some(runtime) = inputs.runtime else {
        return Ok(Vec::new());
    };
    let status = node.status.get_or_insert_with(Default::default);
    status.images = node_images(&runtime.images);
    Ok(Vec::new())
}

/// The images as `status.images` lists them; `None` (the field left out) when there are none.
pub fn node_images(images: &[ImageInfo]) -> Option<Vec<ContainerImage>> {
    let mut sorted: Vec<&ImageInfo> = images.iter().collect();
    sorted.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| b.id.cmp(&a.id))
    });
    let listed: Vec<ContainerImage> = sorted
        .into_iter()
        .take(MAX_IMAGES)
        .map(|image| ContainerImage {
            names: Some(
                image
                    .repo_digests
                    .iter()
                    .chain(&image.repo_tags)
                    .take(MAX_NAMES_PER_IMAGE)
                    .cloned()
                    .collect(),
            ),
            size_bytes: Some(i64::try_from(image.size_bytes).unwrap_or(i64::MAX)),
        })
        .collect();
    (!listed.is_empty()).then_some(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(id: &str, size_bytes: u64, tags: &[&str], digests: &[&str]) -> ImageInfo {
        let owned = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect();
        ImageInfo {
            id: id.to_owned(),
            repo_tags: owned(tags),
            repo_digests: owned(digests),
            size_bytes,
            ..ImageInfo::default()
        }
    }

    fn listed(images: &[ImageInfo]) -> Vec<(Vec<String>, i64)> {
        node_images(images)
            .unwrap_or_default()
            .into_iter()
            .map(|image| {
                (
                    image.names.unwrap_or_default(),
                    image.size_bytes.unwrap_or(-1),
                )
            })
            .collect()
    }

    #[test]
    fn images_are_listed_largest_first_digests_before_tags() {
        let names = |names: &[&str]| {
            names
                .iter()
                .map(|name| (*name).to_owned())
                .collect::<Vec<_>>()
        };
        let cases = [
            (vec![], vec![]),
            (
                vec![
                    image("sha256:a", 100, &["small:1"], &[]),
                    image(
                        "sha256:b",
                        300,
                        &["big:1", "big:latest"],
                        &["big@sha256:bb"],
                    ),
                    image("sha256:c", 200, &[], &["mid@sha256:cc"]),
                ],
                vec![
                    (names(&["big@sha256:bb", "big:1", "big:latest"]), 300),
                    (names(&["mid@sha256:cc"]), 200),
                    (names(&["small:1"]), 100),
                ],
            ),
            (
                vec![
                    image("sha256:a", 7, &["a:1"], &[]),
                    image("sha256:b", 7, &["b:1"], &[]),
                ],
                vec![(names(&["b:1"]), 7), (names(&["a:1"]), 7)],
            ),
            (
                vec![image(
                    "sha256:m",
                    1,
                    &["t1", "t2", "t3", "t4"],
                    &["d1", "d2"],
                )],
                vec![(names(&["d1", "d2", "t1", "t2", "t3"]), 1)],
            ),
            (
                vec![image("sha256:untagged", 5, &[], &[])],
                vec![(Vec::new(), 5)],
            ),
        ];
        for (images, expected) in cases {
            assert_eq!(listed(&images), expected, "{images:?}");
        }
    }

    #[test]
    fn at_most_fifty_images_the_largest_ones() {
        let images: Vec<ImageInfo> = (1..=60)
            .map(|size| {
                image(
                    &format!("sha256:{size:02}"),
                    size,
                    &[&format!("img:{size}")],
                    &[],
                )
            })
            .collect();
        let listed = listed(&images);
        assert_eq!(listed.len(), MAX_IMAGES);
        assert_eq!(listed.first().map(|image| image.1), Some(60));
        assert_eq!(listed.last().map(|image| image.1), Some(11));
    }
}
