//! Whether a pod's volumes are ready for its containers, and if not which ones hold it back, as
//! the kubelet's WaitForAttachAndMount reports it (§1.6). Pure: the pod lifecycle provider polls
//! it (every 300 ms, up to 2 m 3 s in the kubelet) and builds the FailedMount text from it.

use std::collections::BTreeSet;

use super::{
    layout::UniqueVolumeName,
    state::{ActualState, DesiredState, MountState},
};

/// How long the kubelet waits for a pod's volumes before the sync fails (`podAttachAndMountTimeout`).
pub const POD_ATTACH_AND_MOUNT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(123);
/// How often it checks meanwhile.
pub const POD_ATTACH_AND_MOUNT_POLL: std::time::Duration = std::time::Duration::from_millis(300);

/// The verdict for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountReadiness {
    /// Every volume a container mounts is set up (or the pod mounts none).
    Ready,
    /// The pod is not in the desired state (not bound here, or terminated).
    NotDesired,
    /// Volumes that cannot enter the desired state: the kubelet stops waiting at once with
    /// these errors joined by `"; "`.
    PodErrors(String),
    /// Still waiting.
    Waiting(UnmountedVolumes),
}

/// The volumes holding a pod back, by outer name, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnmountedVolumes {
    pub unmounted: Vec<String>,
    /// Attachable volumes the attach/detach controller has not listed in `volumesAttached`.
    pub unattached: Vec<String>,
    /// Volumes missing from the desired state. Always empty here: the desired state is built
    /// from the pod in one step, and volumes it cannot take are `PodErrors` instead; kept so
    /// the text has the kubelet's three lists.
    pub failed_to_process: Vec<String>,
}

impl UnmountedVolumes {
    /// The kubelet's text, `cause` being what ended the wait (on timeout: "context deadline
    /// exceeded"), e.g. `unmounted volumes=[cfg], unattached volumes=[], failed to process
    /// volumes=[]: context deadline exceeded`.
    pub fn message(&self, cause: &str) -> String {
        format!(
            "unmounted volumes={}, unattached volumes={}, failed to process volumes={}: {cause}",
            go_list(&self.unmounted),
            go_list(&self.unattached),
            go_list(&self.failed_to_process),
        )
    }
}

/// The kubelet's FailedMount text for a pod whose volumes cannot all enter the desired state
/// (WaitForAttachAndMount stops at once with the pod errors; SyncPod records it), e.g.
/// `Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed
/// to process volumes=[data]: volume "data": ...`. `None` when the pod has no such error.
pub fn pod_error_message(
    desired: &DesiredState,
    actual: &ActualState,
    pod_uid: &str,
) -> Option<String> {
    let pod = desired.pods.get(pod_uid)?;
    if pod.errors.is_empty() {
        return None;
    }
    let failed: BTreeSet<String> = pod.errors.iter().map(|e| e.volume().to_owned()).collect();
    let mut unmounted: BTreeSet<String> = failed.clone();
    unmounted.extend(
        pod.volumes
            .keys()
            .filter(|name| {
                !actual
                    .mounts
                    .get(&(pod_uid.to_owned(), (*name).clone()))
                    .is_some_and(|m| m.state == MountState::Mounted)
            })
            .cloned(),
    );
    let errors: Vec<String> = pod.errors.iter().map(ToString::to_string).collect();
    let lists = UnmountedVolumes {
        unmounted: unmounted.into_iter().collect(),
        unattached: Vec::new(),
        failed_to_process: failed.into_iter().collect(),
    };
    Some(format!(
        "Unable to attach or mount volumes: {}",
        lists.message(&errors.join("; "))
    ))
}

/// A Go `%v` of a string slice: `[a b]`.
fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Where the volumes of `pod_uid` stand.
pub fn mount_readiness(
    desired: &DesiredState,
    actual: &ActualState,
    volumes_attached: &BTreeSet<UniqueVolumeName>,
    pod_uid: &str,
) -> MountReadiness {
    let Some(pod) = desired.pods.get(pod_uid) else {
        return MountReadiness::NotDesired;
    };
    if !pod.errors.is_empty() {
        let errors: Vec<String> = pod.errors.iter().map(ToString::to_string).collect();
        return MountReadiness::PodErrors(errors.join("; "));
    }
    let mut waiting = UnmountedVolumes::default();
    // A claim not resolved yet is not in the desired state: unmounted, as the kubelet lists it.
    waiting.unmounted.extend(pod.unresolved.iter().cloned());
    for (name, volume) in &pod.volumes {
        let mounted = actual
            .mounts
            .get(&(pod_uid.to_owned(), name.clone()))
            .is_some_and(|m| m.state == MountState::Mounted);
        if mounted {
            continue;
        }
        waiting.unmounted.push(name.clone());
        if volume.attachable && !volumes_attached.contains(&volume.unique_name) {
            waiting.unattached.push(name.clone());
        }
    }
    waiting.unmounted.sort();
    if waiting.unmounted.is_empty() {
        MountReadiness::Ready
    } else {
        MountReadiness::Waiting(waiting)
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::volume_manager::fixtures::{pod, pod_with_cfg_and_cache};

    #[test]
    fn a_pod_is_ready_once_every_volume_is_certainly_mounted() {
        let desired = DesiredState::from_pods(&[pod_with_cfg_and_cache("u1", "n1")], "n1");
        let none = BTreeSet::new();
        let mut actual = ActualState::default();
        let volume = |name: &str| desired.pods["u1"].volumes[name].clone();
        actual.mark_mounted("u1", &volume("cache"), Instant::now());
        let MountReadiness::Waiting(waiting) = mount_readiness(&desired, &actual, &none, "u1")
        else {
            panic!("cfg is not mounted yet");
        };
        assert_eq!(
            waiting.message("context deadline exceeded"),
            "unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: \
             context deadline exceeded"
        );
        actual.mark_mounted("u1", &volume("cfg"), Instant::now());
        assert_eq!(
            mount_readiness(&desired, &actual, &none, "u1"),
            MountReadiness::Ready
        );
        // A reconstructed (uncertain) mount is not ready until SetUp ran again.
        let key = ("u1".to_owned(), "cfg".to_owned());
        actual.mounts.get_mut(&key).unwrap().state = MountState::Uncertain;
        assert!(matches!(
            mount_readiness(&desired, &actual, &none, "u1"),
            MountReadiness::Waiting(_)
        ));
    }

    #[test]
    fn unsupported_volumes_stop_the_wait_with_their_errors() {
        let desired = DesiredState::from_pods(
            &[pod(
                "u1",
                "n1",
                json!([
                    {"name": "a", "ephemeral": {}},
                    {"name": "b", "csi": {"driver": "d"}},
                ]),
            )],
            "n1",
        );
        let got = mount_readiness(&desired, &ActualState::default(), &BTreeSet::new(), "u1");
        assert_eq!(
            got,
            MountReadiness::PodErrors(
                "volume \"a\": ephemeral volumes are not supported by nodepulse yet; \
                 volume \"b\": csi volumes are not supported by nodepulse yet"
                    .into()
            )
        );
    }

    #[test]
    fn a_claim_not_resolved_yet_keeps_the_pod_waiting_without_an_error() {
        let desired = DesiredState::from_pods(
            &[pod(
                "u1",
                "n1",
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]),
            )],
            "n1",
        );
        let actual = ActualState::default();
        let got = mount_readiness(&desired, &actual, &BTreeSet::new(), "u1");
        let MountReadiness::Waiting(waiting) = got else {
            panic!("waiting, got {got:?}");
        };
        assert_eq!(waiting.unmounted, ["data"]);
        assert_eq!(pod_error_message(&desired, &actual, "u1"), None);
    }

    #[test]
    fn a_pod_error_gives_the_kubelets_failed_mount_text() {
        let desired = DesiredState::from_pods(
            &[pod(
                "u1",
                "n1",
                json!([
                    {"name": "data", "ephemeral": {}},
                    {"name": "cfg", "configMap": {"name": "app"}},
                ]),
            )],
            "n1",
        );
        let mut actual = ActualState::default();
        actual.mark_mounted("u1", &desired.pods["u1"].volumes["cfg"], Instant::now());
        assert_eq!(
            pod_error_message(&desired, &actual, "u1").as_deref(),
            Some(
                "Unable to attach or mount volumes: unmounted volumes=[data], unattached \
                 volumes=[], failed to process volumes=[data]: volume \"data\": \
                 ephemeral volumes are not supported by nodepulse yet"
            )
        );
        let fine = DesiredState::from_pods(&[pod_with_cfg_and_cache("u2", "n1")], "n1");
        assert_eq!(pod_error_message(&fine, &actual, "u2"), None);
    }

    #[test]
    fn an_attachable_volume_not_in_volumes_attached_is_unattached() {
        let mut desired = DesiredState::from_pods(
            &[pod("u1", "n1", json!([{"name": "data", "emptyDir": {}}]))],
            "n1",
        );
        let unique = UniqueVolumeName::attachable(crate::volume_manager::Plugin::Csi, "d^v");
        let volume = desired
            .pods
            .get_mut("u1")
            .map(std::sync::Arc::make_mut)
            .unwrap()
            .volumes
            .get_mut("data")
            .unwrap();
        volume.attachable = true;
        volume.unique_name = unique.clone();
        let actual = ActualState::default();
        let MountReadiness::Waiting(waiting) =
            mount_readiness(&desired, &actual, &BTreeSet::new(), "u1")
        else {
            panic!("nothing is mounted");
        };
        assert_eq!(waiting.unattached, ["data"]);
        let MountReadiness::Waiting(waiting) =
            mount_readiness(&desired, &actual, &BTreeSet::from([unique]), "u1")
        else {
            panic!("attached but not mounted");
        };
        assert_eq!(
            (waiting.unmounted, waiting.unattached),
            (vec!["data".to_owned()], vec![])
        );
    }

    #[test]
    fn unknown_pods_and_pods_without_volumes() {
        let desired = DesiredState::from_pods(&[pod("u1", "n1", json!([]))], "n1");
        let actual = ActualState::default();
        let none = BTreeSet::new();
        assert_eq!(
            mount_readiness(&desired, &actual, &none, "u1"),
            MountReadiness::Ready
        );
        assert_eq!(
            mount_readiness(&desired, &actual, &none, "u9"),
            MountReadiness::NotDesired
        );
    }
}
