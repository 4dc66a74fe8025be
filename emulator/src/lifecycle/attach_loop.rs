//! The attach/detach controller's loop: a reconcile pass (the plan in [`super::attach_detach`])
//! at most every 100 ms (kube-controller-manager's `reconcilerLoopPeriod`) after any change to
//! a kind it reads, carried out through the store with the same rules as API clients. A pass
//! costs nothing while no PersistentVolume or VolumeAttachment exists (fleets of simulated
//! nodes never pay for it).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::attach_detach::{Action, World, plan};
use crate::api::StoredKind;
use crate::api::resource::{NODES, VOLUME_ATTACHMENTS};
use crate::config::AttachDetachConfig;
use crate::store::{DeleteOptions, ObjectKey, Store, strategy::object_entry};

const RECONCILER_PERIOD: Duration = Duration::from_millis(100);

/// The kinds whose changes may change the plan.
const WATCHED: [StoredKind; 7] = [
    StoredKind::Pod,
    StoredKind::Node,
    StoredKind::PersistentVolume,
    StoredKind::PersistentVolumeClaim,
    StoredKind::CsiDriver,
    StoredKind::CsiNode,
    StoredKind::VolumeAttachment,
];

/// Runs until `shutdown` flips or its sender is gone.
pub async fn run(
    store: Arc<Store>,
    config: AttachDetachConfig,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut changes = match store.subscribe(StoredKind::VolumeAttachment, None) {
        Ok(subscription) => subscription.receiver,
        Err(error) => {
            tracing::error!(%error, "the attach/detach controller could not watch the store");
            return;
        }
    };
    let mut controller = AttachDetach {
        store,
        attacher: config.attacher,
        created: BTreeSet::new(),
    };
    let mut dirty = true;
    let mut ticker = tokio::time::interval(RECONCILER_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => if std::mem::take(&mut dirty) {
                controller.reconcile(SystemTime::now());
            },
            change = changes.recv() => match change {
                Ok(change) => dirty |= WATCHED.contains(&change.kind),
                Err(RecvError::Lagged(_)) => dirty = true,
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

struct AttachDetach {
    store: Arc<Store>,
    attacher: bool,
    /// The attachments this controller created and has not deleted.
    created: BTreeSet<String>,
}

impl AttachDetach {
    fn reconcile(&mut self, now: SystemTime) {
        if self.store.count(StoredKind::PersistentVolume) == 0
            && self.store.count(StoredKind::VolumeAttachment) == 0
        {
            return;
        }
        let all = |kind| -> Vec<Value> {
            self.store
                .list(kind, None, |_| true)
                .0
                .iter()
                .map(|object| Value::clone(object))
                .collect()
        };
        let (pods, claims, volumes) = (
            all(StoredKind::Pod),
            all(StoredKind::PersistentVolumeClaim),
            all(StoredKind::PersistentVolume),
        );
        let (csi_drivers, csi_nodes, nodes, attachments) = (
            all(StoredKind::CsiDriver),
            all(StoredKind::CsiNode),
            all(StoredKind::Node),
            all(StoredKind::VolumeAttachment),
        );
        let actions = plan(&World {
            pods: &pods,
            claims: &claims,
            volumes: &volumes,
            csi_drivers: &csi_drivers,
            csi_nodes: &csi_nodes,
            nodes: &nodes,
            attachments: &attachments,
            created: &self.created,
            attacher: self.attacher,
        });
        for action in actions {
            self.carry_out(action, now);
        }
    }

    fn carry_out(&mut self, action: Action, now: SystemTime) {
        let result = match &action {
            Action::CreateAttachment {
                name,
                driver,
                node,
                pv,
            } => {
                let attachment = json!({
                    "metadata": {"name": name},
                    "spec": {"attacher": driver, "nodeName": node, "source": {"persistentVolumeName": pv}},
                });
                self.created.insert(name.clone());
                self.store
                    .create(&VOLUME_ATTACHMENTS, attachment, now)
                    .map(|_| ())
            }
            Action::SetVolumesAttached { node, volumes } => self
                .store
                .update(
                    &NODES,
                    &ObjectKey::new("", node.as_str()),
                    Some("status"),
                    |current| {
                        let mut next = current.clone();
                        if let Some(map) = next.as_object_mut() {
                            let status = object_entry(map, "status");
                            if volumes.is_empty() {
                                status.remove("volumesAttached");
                            } else {
                                status
                                    .insert("volumesAttached".into(), Value::from(volumes.clone()));
                            }
                        }
                        Ok(next)
                    },
                )
                .map(|_| ()),
            Action::DeleteAttachment { name } => {
                self.created.remove(name);
                self.store
                    .delete(
                        &VOLUME_ATTACHMENTS,
                        &ObjectKey::new("", name.as_str()),
                        &DeleteOptions::default(),
                        now,
                    )
                    .map(|_| ())
            }
            Action::MarkAttached { name } => self.set_status(name, |status| {
                status.insert("attached".into(), json!(true));
                status.remove("attachError");
            }),
            Action::SetAttachError { name, message } => {
                let at = crate::time::format_time(now);
                self.set_status(name, |status| {
                    status.insert(
                        "attachError".into(),
                        json!({"time": at, "message": message}),
                    );
                })
            }
        };
        match result {
            Ok(()) => tracing::debug!(?action, "attach/detach"),
            // Gone or changed meanwhile: the next pass sees the new state.
            Err(error) if matches!(error.code, 404 | 409) => {}
            Err(error) => tracing::warn!(?action, %error, "attach/detach write failed"),
        }
    }

    fn set_status(
        &self,
        name: &str,
        change: impl FnOnce(&mut serde_json::Map<String, Value>),
    ) -> Result<(), crate::api::ApiError> {
        self.store
            .update(
                &VOLUME_ATTACHMENTS,
                &ObjectKey::new("", name),
                Some("status"),
                |current| {
                    let mut next = current.clone();
                    if let Some(map) = next.as_object_mut() {
                        change(object_entry(map, "status"));
                    }
                    Ok(next)
                },
            )
            .map(|_| ())
    }
}
