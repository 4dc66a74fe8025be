//! What the pod lifecycle providers need from the volume manager: whether a pod's volumes are
//! set up, and where on the host each one is, so containers mount exactly what the volume
//! manager mounted. The volume manager publishes this view; providers only read it, and
//! PodLifecycleActor is told (`PodVolumesChanged`) when a pod's verdict may have changed.

use std::{collections::BTreeMap, path::PathBuf};

use actix::Message;

use k8s_openapi::api::core::v1::Pod;

use crate::volume_manager::{MountReadiness, pod_volumes};

pub trait PodVolumeView: Send + Sync + 'static {
    /// Where the volumes of `pod_uid` stand (the kubelet's WaitForAttachAndMount verdict).
    fn readiness(&self, pod_uid: &str) -> MountReadiness;
    /// The host path of each set-up volume of the pod, by outer volume name.
    fn host_paths(&self, pod_uid: &str) -> BTreeMap<String, PathBuf>;
}

/// Whether `pod`'s containers may start (the kubelet's WaitForAttachAndMount has returned): every
/// volume is set up. A pod the volume manager has not taken in yet waits, unless it mounts
/// nothing at all; a pod with volumes that cannot be served waits too (the volume manager
/// reports why, in its FailedMount events).
pub fn volumes_ready(view: &dyn PodVolumeView, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    match view.readiness(uid) {
        MountReadiness::Ready => true,
        MountReadiness::NotDesired => {
            let found = pod_volumes(pod);
            found.volumes.is_empty() && found.errors.is_empty() && found.unresolved.is_empty()
        }
        MountReadiness::PodErrors(_) | MountReadiness::Waiting(_) => false,
    }
}

/// Sent by the volume manager to PodLifecycleActor: the readiness of this pod's volumes may have
/// changed (mounted, failed, or unmounted), so a provider waiting on it should look again.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct PodVolumesChanged {
    pub pod_uid: String,
}
