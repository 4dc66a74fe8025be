//! Mirror pods, as the kubelet keeps them (`kl/pod/mirror_client.go`, `tryReconcileMirrorPods`,
//! housekeeping's orphan clean-up): for each static pod, a copy in the API carrying
//! `kubernetes.io/config.mirror` (its hash) and a controller owner reference to the Node. A
//! mirror of another hash or one being deleted is force-deleted (its UID as precondition) and
//! made again; a mirror whose static pod is gone is deleted once both sides are fully known.
//! [`MirrorPlan`] decides, pure; [`MirrorPlan::act`] makes the calls.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::{
    api::core::v1::{Node, Pod},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use nodepulse_actors::{
    config_source::{MIRROR_ANNOTATION, mirror_hash, static_hash},
    ports::{ApiError, PodWatchEvent},
};

use super::files::full_name;
use crate::node::ApiPorts;

/// One call to the API server.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    /// No mirror pod for this static pod: create one.
    Create(Box<Pod>),
    /// A mirror pod to delete (`gracePeriodSeconds: 0`, its UID as precondition).
    Delete {
        namespace: String,
        name: String,
        uid: String,
        why: &'static str,
    },
}

/// What the kubelet's pod manager knows of both sides, by full name.
#[derive(Debug, Default)]
pub struct MirrorPlan {
    statics: BTreeMap<String, Pod>,
    statics_read: bool,
    mirrors: BTreeMap<String, Pod>,
    mirrors_listed: bool,
}

impl MirrorPlan {
    /// The static pods now (the latest read of every static source); `all_read`: every source
    /// was read at least once, so a mirror pod without a static pod is an orphan (the
    /// kubelet's housekeeping waits for all sources to be ready).
    pub fn set_static_pods<'a>(&mut self, pods: impl Iterator<Item = &'a Pod>, all_read: bool) {
        self.statics = pods.map(|pod| (full_name(pod), pod.clone())).collect();
        self.statics_read = all_read;
    }

    /// A mirror pod event from the API watch of the node's pods (and its `Listed`).
    pub fn observe(&mut self, event: PodWatchEvent) {
        match event {
            PodWatchEvent::Applied(pod) => {
                let pod = pod.pod();
                self.mirrors
                    .insert(full_name(&pod), Arc::unwrap_or_clone(pod));
            }
            PodWatchEvent::Deleted(pod) => {
                let pod = pod.pod();
                let key = full_name(&pod);
                if self.mirrors.get(&key).map(|known| &known.metadata.uid)
                    == Some(&pod.metadata.uid)
                {
                    self.mirrors.remove(&key);
                }
            }
            PodWatchEvent::Listed => self.mirrors_listed = true,
        }
    }

    /// Whether `pod` is the mirror pod of a static pod there is now.
    pub fn mirrors_a_static_pod(&self, pod: &Pod) -> bool {
        self.statics.get(&full_name(pod)).is_some_and(|wanted| {
            mirror_hash(pod).is_some() && mirror_hash(pod) == static_hash(wanted)
        })
    }

    /// What to call now. Nothing before the API's list: a mirror pod not seen may be there.
    pub fn actions(&self) -> Vec<MirrorAction> {
        if !self.mirrors_listed {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for (key, wanted) in &self.statics {
            let Some(mirror) = self.mirrors.get(key) else {
                actions.push(MirrorAction::Create(Box::new(wanted.clone())));
                continue;
            };
            let why = if mirror.metadata.deletion_timestamp.is_some() {
                "the mirror pod is being deleted"
            } else if mirror_hash(mirror) != static_hash(wanted) {
                "Deleted mirror pod as it didn't match the static Pod"
            } else {
                continue;
            };
            actions.push(delete(mirror, why));
        }
        if self.statics_read {
            actions.extend(
                (self.mirrors.iter())
                    .filter(|(key, _)| !self.statics.contains_key(*key))
                    .map(|(_, orphan)| delete(orphan, "Deleted mirror pod")),
            );
        }
        actions
    }

    /// Makes `actions`' calls in order, noting what each did; the first failure ends the
    /// round (the next one tries again). A mirror is made only for a Node that is registered
    /// and not being deleted, as the kubelet's `tryReconcileMirrorPods`.
    pub async fn act(
        &mut self,
        api: &dyn ApiPorts,
        node: &str,
        actions: Vec<MirrorAction>,
    ) -> Result<(), MirrorError> {
        for action in actions {
            match action {
                MirrorAction::Create(pod) => {
                    let node_object = match api.get_node(node).await {
                        Ok(node_object) => node_object,
                        Err(ApiError::NotFound(_)) => return Err(MirrorError::NodeNotRegistered),
                        Err(error) => return Err(MirrorError::GetNode(error)),
                    };
                    if node_object.metadata.deletion_timestamp.is_some() {
                        return Err(MirrorError::NodeRemoved);
                    }
                    let mirror = mirror_pod(&pod, &node_object)?;
                    tracing::info!(pod = %full_name(&pod), "Creating a mirror pod for static pod");
                    let created = match api.create_pod(mirror).await {
                        Ok(created) => created,
                        // The kubelet's `CreateMirrorPod`: fine when it is this hash's mirror.
                        Err(ApiError::AlreadyExists(_)) => {
                            let (namespace, name) = namespace_name(&pod);
                            let existing = api
                                .get_pod(&namespace, &name)
                                .await
                                .map_err(MirrorError::Create)?;
                            if mirror_hash(&existing) != static_hash(&pod) {
                                return Err(MirrorError::Taken(full_name(&pod)));
                            }
                            existing
                        }
                        Err(error) => return Err(MirrorError::Create(error)),
                    };
                    self.mirrors.insert(full_name(&created), created);
                }
                MirrorAction::Delete {
                    namespace,
                    name,
                    uid,
                    why,
                } => {
                    match api.delete_pod(&namespace, &name, &uid).await {
                        // Conflict: another pod has the name now; the watch says which.
                        Ok(()) | Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => {
                            tracing::info!(pod = %format!("{namespace}/{name}"), %uid, "{why}");
                            let key = format!("{namespace}/{name}");
                            if self
                                .mirrors
                                .get(&key)
                                .and_then(|m| m.metadata.uid.as_deref())
                                == Some(uid.as_str())
                            {
                                self.mirrors.remove(&key);
                            }
                        }
                        Err(error) => return Err(MirrorError::Delete(error)),
                    }
                }
            }
        }
        Ok(())
    }
}

fn namespace_name(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn delete(mirror: &Pod, why: &'static str) -> MirrorAction {
    let (namespace, name) = namespace_name(mirror);
    MirrorAction::Delete {
        namespace,
        name,
        uid: mirror.metadata.uid.clone().unwrap_or_default(),
        why,
    }
}

/// Why a round of mirror pod calls stopped. Every one is tried again on the next round.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("Unable to register mirror pod because node is not registered yet")]
    NodeNotRegistered,
    #[error("No need to create a mirror pod, since node has been removed from the cluster")]
    NodeRemoved,
    #[error("No need to create a mirror pod, since failed to get node info from the cluster: {0}")]
    GetNode(#[source] ApiError),
    #[error("failed to get node UID: UID unset for node {0}")]
    NodeUid(String),
    #[error("create mirror pod: {0}")]
    Create(#[source] ApiError),
    #[error("create mirror pod: {0} exists and is not this static pod's mirror")]
    Taken(String),
    #[error("delete mirror pod: {0}")]
    Delete(#[source] ApiError),
}

impl MirrorError {
    /// Whether the API server was out of reach (said once per outage, not every round).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Self::GetNode(ApiError::Transport { .. } | ApiError::Timeout(_))
                | Self::Create(ApiError::Transport { .. } | ApiError::Timeout(_))
                | Self::Delete(ApiError::Transport { .. } | ApiError::Timeout(_))
        )
    }
}

/// The static pod's copy for the API: its metadata (all annotations, plus the mirror one),
/// spec and no status, owned by the Node as the kubelet 1.36 sets it (a controller reference,
/// no `blockOwnerDeletion`), so the garbage collector removes it with the Node.
pub fn mirror_pod(static_pod: &Pod, node: &Node) -> Result<Pod, MirrorError> {
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let Some(node_uid) = node.metadata.uid.clone().filter(|uid| !uid.is_empty()) else {
        return Err(MirrorError::NodeUid(node_name));
    };
    let meta = &static_pod.metadata;
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    annotations.insert(
        MIRROR_ANNOTATION.to_owned(),
        static_hash(static_pod).unwrap_or_default().to_owned(),
    );
    Ok(Pod {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Node".to_owned(),
                name: node_name,
                uid: node_uid,
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    })
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
