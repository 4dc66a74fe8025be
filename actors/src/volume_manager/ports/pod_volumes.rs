//! What the pod lifecycle providers need from the volume manager: whether a pod's volumes are
//! set up, and where on the host each one is, so containers mount exactly what the volume
//! manager mounted. The volume manager publishes this view; providers only read it, and
//! PodLifecycleActor is told (`PodVolumesChanged`) when a pod's verdict may have changed.

use std::{collections::BTreeMap, path::PathBuf};

use actix::Message;

use crate::volume_manager::MountReadiness;

pub trait PodVolumeView: Send + Sync + 'static {
    /// Where the volumes of `pod_uid` stand (the kubelet's WaitForAttachAndMount verdict).
    fn readiness(&self, pod_uid: &str) -> MountReadiness;
    /// The host path of each set-up volume of the pod, by outer volume name.
    fn host_paths(&self, pod_uid: &str) -> BTreeMap<String, PathBuf>;
}

/// Sent by the volume manager to PodLifecycleActor: the readiness of this pod's volumes may have
/// changed (mounted, failed, or unmounted), so a provider waiting on it should look again.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct PodVolumesChanged {
    pub pod_uid: String,
}
