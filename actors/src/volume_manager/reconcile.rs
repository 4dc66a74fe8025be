//! One reconciler pass as a pure step (§1.3): compare the desired and actual states and return
//! the operations that bring the disk in line, plus the `volumesInUse` list (§1.8). Time is an
//! argument; the actor runs the operations and records their outcome in the actual state.

use std::{collections::BTreeSet, time::Duration};

use tokio::time::Instant;

use super::{
    layout::UniqueVolumeName,
    plugin::Plugin,
    spec::PodVolume,
    state::{ActualState, DesiredState, MountState},
};

/// The kubelet's pod resync period (`syncFrequency`, 1 min): configMap, secret, downwardAPI
/// and projected contents are refreshed at most once per pod sync (§1.2).
pub const REMOUNT_PERIOD: Duration = Duration::from_secs(60);

/// One thing to do on disk.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// Set up a volume not (certainly) set up yet.
    Mount { pod_uid: String, volume: PodVolume },
    /// Rewrite a set-up volume's content from its source (atomic-writer plugins only).
    Remount { pod_uid: String, volume: PodVolume },
    /// Tear down a volume no pod of this UID needs any more.
    Unmount {
        pod_uid: String,
        volume: String,
        plugin: Plugin,
    },
    /// Unstage a CSI volume no pod has published or wants (the kubelet's UnmountDevice).
    UnmountDevice { unique_name: UniqueVolumeName },
    /// Remove the directory of a pod that is gone and has nothing set up left.
    RemovePodDir { pod_uid: String },
}

/// The operations one pass wants, in the kubelet's order: unmounts, then device unmounts,
/// then mounts and remounts, then pod directory removal.
///
/// `volumes_attached` is `node.status.volumesAttached` by unique name: an attachable volume is
/// mounted only once the attach/detach controller lists it there.
pub fn reconcile(
    desired: &DesiredState,
    actual: &ActualState,
    volumes_attached: &BTreeSet<UniqueVolumeName>,
    now: Instant,
    remount_period: Duration,
) -> Vec<Operation> {
    let mut operations = Vec::new();
    // Unmounting before the desired state is complete would tear down a reconstructed volume
    // of a pod that simply has not been seen yet.
    if desired.populated {
        for ((pod_uid, volume), mounted) in &actual.mounts {
            // A CSI mount read back from disk is named after its PV until the pod's claim is
            // resolved and it is adopted under the pod's volume name: not an orphan before.
            let adoptable = mounted.plugin == Plugin::Csi
                && desired
                    .pods
                    .get(pod_uid)
                    .is_some_and(|pod| !pod.unresolved.is_empty());
            if !desired.wants(pod_uid, volume) && !adoptable {
                operations.push(Operation::Unmount {
                    pod_uid: pod_uid.clone(),
                    volume: volume.clone(),
                    plugin: mounted.plugin,
                });
            }
        }
        // Also a device staged before a restart whose pods' publish directories were gone
        // by then: nothing else would ever unstage it. Not while a pod's claim is unresolved:
        // it may name this very volume.
        let claims_pending = desired.pods.values().any(|pod| !pod.unresolved.is_empty());
        for unique_name in actual.devices.keys().filter(|_| !claims_pending) {
            if !actual.any_uses(unique_name) && !desired.wants_unique(unique_name) {
                operations.push(Operation::UnmountDevice {
                    unique_name: unique_name.clone(),
                });
            }
        }
    }
    for (pod_uid, pod) in &desired.pods {
        for volume in pod.volumes.values() {
            if volume.attachable && !volumes_attached.contains(&volume.unique_name) {
                continue;
            }
            let key = (pod_uid.clone(), volume.name.clone());
            let operation = match actual.mounts.get(&key) {
                None => Some(Operation::Mount {
                    pod_uid: pod_uid.clone(),
                    volume: volume.clone(),
                }),
                // SetUp is idempotent: re-running it is how the kubelet settles an uncertain
                // mount, and it never stacks a second mount on the first.
                Some(mounted) if mounted.state == MountState::Uncertain => Some(Operation::Mount {
                    pod_uid: pod_uid.clone(),
                    volume: volume.clone(),
                }),
                Some(mounted) if remount_due(volume, mounted.set_up_at, now, remount_period) => {
                    Some(Operation::Remount {
                        pod_uid: pod_uid.clone(),
                        volume: volume.clone(),
                    })
                }
                Some(_) => None,
            };
            operations.extend(operation);
        }
    }
    if desired.populated {
        for pod_uid in &actual.pod_dirs {
            if !desired.pods.contains_key(pod_uid) && !actual.pod_has_mounts(pod_uid) {
                operations.push(Operation::RemovePodDir {
                    pod_uid: pod_uid.clone(),
                });
            }
        }
    }
    operations
}

fn remount_due(
    volume: &PodVolume,
    set_up_at: Option<Instant>,
    now: Instant,
    period: Duration,
) -> bool {
    volume.plugin.requires_remount()
        && set_up_at.is_none_or(|at| now.saturating_duration_since(at) >= period)
}

/// `node.status.volumesInUse`: the attachable volumes the pods want or that are still set up
/// or staged, sorted and de-duplicated. `None` until the reconciler has synced once since start, when the
/// kubelet leaves the field as it found it.
pub fn volumes_in_use(
    desired: &DesiredState,
    actual: &ActualState,
    reconciler_synced: bool,
) -> Option<Vec<UniqueVolumeName>> {
    if !reconciler_synced {
        return None;
    }
    let wanted = desired
        .pods
        .values()
        .flat_map(|pod| pod.volumes.values())
        .filter(|volume| volume.attachable)
        .map(|volume| volume.unique_name.clone());
    let mounted = actual
        .mounts
        .values()
        .filter(|mounted| mounted.attachable)
        .map(|mounted| mounted.unique_name.clone());
    let staged = actual
        .devices
        .iter()
        .filter(|(_, device)| device.attachable)
        .map(|(unique_name, _)| unique_name.clone());
    let in_use: BTreeSet<UniqueVolumeName> = wanted.chain(mounted).chain(staged).collect();
    Some(in_use.into_iter().collect())
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
