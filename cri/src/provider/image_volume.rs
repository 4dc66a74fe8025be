//! Image volumes (`volumes[].image`, KEP 4639, on by default in 1.36), as the kubelet's
//! `getImageVolumes`: before a container that mounts one is created, the volume's image is made
//! present as a container's own image is (the pod's pull secrets, the volume's `pullPolicy`, the
//! same back-off, events and waiting reasons, `ErrImagePull` and `ImagePullBackOff`), and the
//! container's CRI mount names that image instead of a host path (read-only, its `subPath` as
//! the image sub path). Mounting it is the runtime's work. A runtime that predates image
//! volumes (containerd 1.6 reads neither field) sees a mount of the empty host path and refuses
//! CreateContainer: the container waits in `CreateContainerError`, as under the kubelet, and
//! never runs without the volume.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{Container, ImageVolumeSource, Pod};

use super::{engine::Engine, worker::Failure};
use nodepulse_actors::{
    pods::images::ImageRequest,
    ports::{ImageMount, SandboxConfig},
};

/// The pod's image volumes `container` mounts, by volume name, in the order of its mounts.
fn mounted_image_volumes<'a>(
    pod: &'a Pod,
    container: &Container,
) -> Vec<(&'a str, &'a ImageVolumeSource)> {
    let volumes = (pod.spec.as_ref())
        .and_then(|spec| spec.volumes.as_deref())
        .unwrap_or_default();
    let mut mounted: Vec<(&str, &ImageVolumeSource)> = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let found = volumes
            .iter()
            .find(|volume| volume.name == mount.name)
            .and_then(|volume| Some((volume.name.as_str(), volume.image.as_ref()?)));
        if let Some(found) = found
            && !mounted.iter().any(|(name, _)| *name == found.0)
        {
            mounted.push(found);
        }
    }
    mounted
}

/// The image mount of image volume `source` whose image resolved to `image` (the mount's own
/// `subPath` is added per mount).
fn image_mount(pod: &Pod, source: &ImageVolumeSource, image: String) -> ImageMount {
    ImageMount {
        image,
        user_specified_image: source.reference.clone().unwrap_or_default(),
        annotations: pod.metadata.annotations.clone().unwrap_or_default(),
        sub_path: String::new(),
    }
}

impl Engine {
    /// The image of every image volume `container` mounts, present, by volume name; or why the
    /// container cannot start yet (the failed pull's reason and message, its events recorded).
    pub(super) async fn ensure_image_volumes(
        &self,
        pod: &Arc<Pod>,
        container: &Container,
        sandbox: &SandboxConfig,
    ) -> Result<BTreeMap<String, ImageMount>, Failure> {
        let mut mounts = BTreeMap::new();
        for (name, source) in mounted_image_volumes(pod, container) {
            let image = self
                .ensure_image(pod, ImageRequest::of_volume(source), sandbox)
                .await?;
            mounts.insert(name.to_owned(), image_mount(pod, source, image));
        }
        Ok(mounts)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, Pod};
    use serde_json::json;

    use super::mounted_image_volumes;

    #[test]
    fn only_the_image_volumes_a_container_mounts_count_each_once_in_mount_order() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [],
                "volumes": [
                    {"name": "unused", "image": {"reference": "r/unused:1"}},
                    {"name": "kitten", "image": {"reference": "r/kitten:1", "pullPolicy": "Always"}},
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "cat", "image": {"reference": "r/cat:1"}},
                ],
            },
        }))
        .unwrap();
        let container: Container = serde_json::from_value(json!({
            "name": "app",
            "volumeMounts": [
                {"name": "cat", "mountPath": "/cat"},
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "kitten", "mountPath": "/a"},
                {"name": "kitten", "mountPath": "/b", "subPath": "etc"},
            ],
        }))
        .unwrap();
        let mounted: Vec<(&str, Option<&str>)> = mounted_image_volumes(&pod, &container)
            .into_iter()
            .map(|(name, source)| (name, source.reference.as_deref()))
            .collect();
        assert_eq!(
            mounted,
            [("cat", Some("r/cat:1")), ("kitten", Some("r/kitten:1"))]
        );
    }
}
