//! The volume manager's CSI half: a pod's claims resolved to CSI volumes (the populator's
//! claim → PV step), then MountDevice once per node and SetUp per pod through the [`CsiNode`]
//! port, and on the way back TearDown, then UnmountDevice once no pod uses or wants the volume
//! (also one found staged on disk after a restart). A volume leaves `volumesInUse` only once
//! unstaged.

use std::{sync::Arc, time::Duration};

use actix::{ActorFutureExt, AsyncContext, Context, WrapFuture};
use tokio::time::Instant;

use super::{Key, VolumeManagerActor};
use futures::FutureExt;

use crate::{
    kubelet_metrics::storage_operation,
    ports::{CsiNode, CsiPod},
    shrink::btree_map_after_removal,
    volume_manager::{
        ClaimRef, MountState, Plugin, PodVolume, StagedDevice, UniqueVolumeName,
        operation_error::OperationError, state::is_terminated,
    },
    volume_manager::{StorageApi, resolve_claim},
};

/// How long a claim that could not be resolved waits before it is looked up again.
pub const CLAIM_RETRY: Duration = Duration::from_secs(2);

/// The ports the CSI half needs: the storage objects and the node plugin operations.
#[derive(Clone)]
pub struct CsiPorts {
    pub storage: Arc<dyn StorageApi>,
    pub node: Arc<dyn CsiNode>,
}

/// A CSI step that failed: the kubelet's operation name (`MountVolume.SetUp`) and the error.
type StepError = (&'static str, OperationError);

impl VolumeManagerActor {
    /// Starts resolving every claim volume of the pods bound here that is not resolved yet, or
    /// whose last attempt failed and is due again.
    pub(super) fn resolve_claims(&mut self, now: Instant, ctx: &mut Context<Self>) {
        let Some(ports) = self.csi.clone() else {
            return;
        };
        let node = self.settings.node_name.clone();
        let due: Vec<(Key, String, String, bool)> = self.memory.read(|m| {
            let mut due = Vec::new();
            // Only the pods that declare a claim: the others are not decoded for nothing.
            let pods = (m.claim_pods.iter()).filter_map(|uid| Some((uid, m.pods.get(uid)?)));
            for (uid, pod) in pods {
                let pod = pod.pod();
                let pod = &*pod;
                let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node);
                if !bound || is_terminated(pod) {
                    continue;
                }
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                let declared = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
                for volume in declared {
                    let Some(claim) = &volume.persistent_volume_claim else {
                        continue;
                    };
                    let key = (uid.clone(), volume.name.clone());
                    let retry = m.claim_retry_at.get(&key).is_some_and(|at| *at <= now);
                    if !m.claims.contains_key(&key) || retry {
                        let read_only = claim.read_only.unwrap_or(false);
                        due.push((key, namespace.clone(), claim.claim_name.clone(), read_only));
                    }
                }
            }
            due
        });
        for (key, namespace, claim, read_only) in due {
            if !self.in_flight.insert(key.clone()) {
                continue;
            }
            // Due now: no retry time left to wake for while the lookup runs.
            self.memory.update(|m| m.claim_retry_at.remove(&key));
            let (storage, node) = (Arc::clone(&ports.storage), node.clone());
            let work = async move {
                let claim = ClaimRef {
                    namespace: &namespace,
                    claim: &claim,
                    read_only,
                };
                resolve_claim(storage, claim, &node).await
            };
            ctx.spawn(work.into_actor(self).map(move |resolved, actor, ctx| {
                actor.in_flight.remove(&key);
                if let Err(error) = &resolved {
                    tracing::info!(pod_uid = %key.0, volume = %key.1, %error, "claim not usable yet");
                }
                actor.memory.update(|m| {
                    match &resolved {
                        Ok(_) => m.claim_retry_at.remove(&key),
                        Err(_) => m.claim_retry_at.insert(key.clone(), Instant::now() + CLAIM_RETRY),
                    };
                    m.claims.insert(key.clone(), resolved);
                });
                actor.changed(&key.0);
                actor.wake_in(Duration::ZERO, ctx);
            }));
        }
    }

    /// When the next failed claim is due again.
    pub(super) fn next_claim_retry(&self, now: Instant) -> Option<Duration> {
        self.memory.read(|m| {
            m.claim_retry_at
                .values()
                .map(|at| at.saturating_duration_since(now))
                .min()
        })
    }

    /// Forgets the claims of pods no longer desired.
    pub(super) fn forget_claims(&self, keep: impl Fn(&str) -> bool) {
        self.memory.update(|m| {
            m.claims.retain(|(uid, _), _| keep(uid));
            btree_map_after_removal(&mut m.claims);
            m.claim_retry_at.retain(|(uid, _), _| keep(uid));
            btree_map_after_removal(&mut m.claim_retry_at);
        });
    }

    /// MountDevice (unless staged already), then SetUp. An attachable volume reads its
    /// attachment's publish context first: the controller wrote it when it attached.
    pub(super) fn csi_set_up(
        &mut self,
        pod_uid: String,
        volume: PodVolume,
        ctx: &mut Context<Self>,
    ) -> bool {
        let key = (pod_uid.clone(), volume.name.clone());
        let (Some(ports), Some(mut csi)) = (self.csi.clone(), volume.csi.as_deref().cloned())
        else {
            return false;
        };
        if self.in_flight.contains(&device_key(&volume.unique_name)) {
            // Being unstaged for a pod that went: staged again once that is done.
            return true;
        }
        let node = self.settings.node_name.clone();
        let staged = self.memory.read(|m| m.actual.staged(&volume.unique_name));
        if !staged && !self.staging.insert(volume.unique_name.clone()) {
            // Another pod's SetUp stages it; this one follows once it is staged.
            return true;
        }
        self.in_flight.insert(key.clone());
        *self
            .publishing
            .entry(volume.unique_name.clone())
            .or_default() += 1;
        let device = StagedDevice {
            csi: csi.clone(),
            attachable: volume.attachable,
            state: MountState::Mounted,
        };
        let started = Instant::now();
        let work = async move {
            if volume.attachable {
                csi.publish_context = ports
                    .storage
                    .attachment_metadata(&csi.driver, &csi.volume_handle, &node)
                    .await
                    .map_err(|e| ("MountVolume.WaitForAttach", e.into()))
                    .map_err(|e| (false, e))?;
            }
            if !staged {
                ports
                    .node
                    .mount_device(csi.clone())
                    .await
                    .map_err(|e| (false, ("MountVolume.MountDevice", e.into())))?;
            }
            let pod = CsiPod {
                uid: pod_uid,
                node_name: node,
            };
            ports
                .node
                .set_up(pod, csi)
                .await
                .map_err(|e| (true, ("MountVolume.SetUp", e.into())))?;
            Ok::<(), (bool, StepError)>(())
        };
        let work = work.inspect(move |outcome| {
            storage_operation(Plugin::Csi.name(), "volume_mount", started, outcome.is_ok());
        });
        ctx.spawn(work.into_actor(self).map(move |outcome, actor, ctx| {
            actor.in_flight.remove(&key);
            if !staged {
                actor.staging.remove(&volume.unique_name);
            }
            actor.done_publishing(&volume.unique_name);
            let now_staged = outcome.is_ok() || outcome.as_ref().is_err_and(|(s, _)| *s);
            if now_staged && !staged {
                actor.memory.update(|m| {
                    m.actual
                        .devices
                        .insert(volume.unique_name.clone(), device.clone())
                });
            }
            match outcome {
                // Recorded even if the pod went meanwhile, so the next pass unpublishes it.
                Ok(()) => {
                    actor
                        .memory
                        .update(|m| m.actual.mark_mounted(&key.0, &volume, Instant::now()));
                    tracing::info!(pod_uid = %key.0, volume = %key.1, "CSI volume published");
                    actor.settle(&key, Ok(()), Instant::now());
                    actor.changed(&key.0);
                }
                Err((_, (operation, error))) => {
                    actor.settle_as(operation, &key, Err(error), Instant::now());
                }
            }
            actor.wake_in(Duration::ZERO, ctx);
        }));
        true
    }

    /// TearDown of one pod's publish. The volume stays staged, and so in `volumesInUse`,
    /// until a later pass finds no pod using or wanting it and unstages it.
    pub(super) fn csi_tear_down(&mut self, key: Key, ctx: &mut Context<Self>) -> bool {
        let mounted = self.memory.read(|m| m.actual.mounts.get(&key).cloned());
        let (Some(ports), Some(mounted)) = (self.csi.clone(), mounted) else {
            return false;
        };
        let Some(csi) = mounted.csi.as_deref().cloned() else {
            tracing::warn!(pod_uid = %key.0, volume = %key.1, "a CSI mount without its volume; cannot unpublish it");
            return false;
        };
        self.in_flight.insert(key.clone());
        let pod_uid = key.0.clone();
        let started = Instant::now();
        let work =
            async move { ports.node.tear_down(pod_uid, csi).await }.inspect(move |outcome| {
                storage_operation(
                    Plugin::Csi.name(),
                    "volume_unmount",
                    started,
                    outcome.is_ok(),
                );
            });
        ctx.spawn(work.into_actor(self).map(move |outcome, actor, ctx| {
            actor.in_flight.remove(&key);
            match outcome {
                Ok(()) => {
                    actor.memory.update(|m| {
                        m.actual.mark_unmounted(&key.0, &key.1);
                        // A volume set up before a restart is staged, whether or not the
                        // disk showed its staging directory.
                        if let Some(csi) = &mounted.csi {
                            m.actual
                                .devices
                                .entry(mounted.unique_name.clone())
                                .or_insert_with(|| StagedDevice {
                                    csi: csi.as_ref().clone(),
                                    attachable: mounted.attachable,
                                    state: MountState::Uncertain,
                                });
                        }
                    });
                    tracing::info!(pod_uid = %key.0, volume = %key.1, "CSI volume unpublished");
                    actor.settle(&key, Ok(()), Instant::now());
                    actor.changed(&key.0);
                }
                Err(error) => {
                    let error = OperationError::from(error);
                    actor.settle_as("UnmountVolume.TearDown", &key, Err(error), Instant::now());
                }
            }
            actor.wake_in(Duration::ZERO, ctx);
        }));
        true
    }

    /// UnmountDevice of a volume no pod uses or wants; it leaves `volumesInUse` once done.
    pub(super) fn csi_unmount_device(
        &mut self,
        unique_name: UniqueVolumeName,
        ctx: &mut Context<Self>,
    ) -> bool {
        if self.staging.contains(&unique_name) || self.publishing.contains_key(&unique_name) {
            // A SetUp is staging or publishing it (CSI calls on one volume never overlap):
            // that pod's publish is recorded first, then looked at.
            return true;
        }
        let device = self
            .memory
            .read(|m| m.actual.devices.get(&unique_name).cloned());
        let (Some(ports), Some(device)) = (self.csi.clone(), device) else {
            return false;
        };
        let key = device_key(&unique_name);
        self.in_flight.insert(key.clone());
        let work = async move { ports.node.unmount_device(device.csi).await };
        ctx.spawn(work.into_actor(self).map(move |outcome, actor, ctx| {
            actor.in_flight.remove(&key);
            match outcome {
                Ok(()) => {
                    actor
                        .memory
                        .update(|m| m.actual.mark_unstaged(&unique_name));
                    tracing::info!(volume = %unique_name, "CSI volume unstaged");
                    actor.settle(&key, Ok(()), Instant::now());
                }
                Err(error) => {
                    // Possibly half unstaged: the next pod's SetUp stages it again first.
                    actor.memory.update(|m| {
                        if let Some(device) = m.actual.devices.get_mut(&unique_name) {
                            device.state = MountState::Uncertain;
                        }
                    });
                    actor.settle_as("UnmountDevice", &key, Err(error.into()), Instant::now());
                }
            }
            actor.wake_in(Duration::ZERO, ctx);
        }));
        true
    }
}

impl VolumeManagerActor {
    fn done_publishing(&mut self, unique_name: &UniqueVolumeName) {
        if let Some(count) = self.publishing.get_mut(unique_name) {
            *count -= 1;
            if *count == 0 {
                self.publishing.remove(unique_name);
            }
        }
    }
}

/// The in-flight and failure key of a node-wide device operation: no pod, the volume's unique
/// name (a pod UID is never empty, so it cannot clash with a pod's volume).
pub(super) fn device_key(unique_name: &UniqueVolumeName) -> Key {
    (String::new(), unique_name.to_string())
}
