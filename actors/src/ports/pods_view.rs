//! The pods a node's provider runs, as services outside the actors read them (the kubelet API's
//! logs and exec, image GC, the debug endpoint): per pod its names, sandboxes and containers
//! with their IDs, states, restart counts, log paths and images. The CRI engine publishes a new
//! snapshot only when a pod's record changed; readers hold an `Arc` of a snapshot and never
//! lock the engine. A record holds IDs and names only, never the Pod object.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::ContainerState;

/// One sandbox of a pod, as the runtime last reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRecord {
    /// The runtime's sandbox ID (what `ListPodSandbox` and `PodSandboxStats` take).
    pub id: String,
    pub ready: bool,
    pub created_at: Option<Timestamp>,
}

/// One container instance of a pod (the current one, and those that ran before it while the
/// runtime keeps them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRecord {
    /// The container's name in the pod spec.
    pub name: String,
    /// The runtime's container ID, without the `containerd://` prefix of the pod status.
    pub id: String,
    pub state: ContainerState,
    /// The kubelet's restart count (its annotation), as the pod status reports it.
    pub restart_count: u32,
    /// The file the runtime writes the container's output to (under `podLogsDir`).
    pub log_path: PathBuf,
    /// The image as the runtime runs it, and the image ID it resolved to.
    pub image: String,
    pub image_ref: String,
    pub created_at: Option<Timestamp>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// Set once the container exited.
    pub exit_code: Option<i32>,
}

/// What the node runs for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRecord {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The pod has a `deletionTimestamp`: a pod of the same name that has none is the newer.
    pub deleting: bool,
    /// Newest first; the first is the one containers run in.
    pub sandboxes: Vec<SandboxRecord>,
    /// Every instance the runtime holds, newest first.
    pub containers: Vec<ContainerRecord>,
}

impl PodRecord {
    /// A pod the node knows with nothing in the runtime yet.
    pub fn new(pod: &Pod) -> Self {
        let metadata = &pod.metadata;
        Self {
            uid: metadata.uid.clone().unwrap_or_default(),
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            deleting: metadata.deletion_timestamp.is_some(),
            sandboxes: Vec::new(),
            containers: Vec::new(),
        }
    }

    /// The newest sandbox's ID.
    pub fn sandbox_id(&self) -> Option<&str> {
        self.sandboxes.first().map(|sandbox| sandbox.id.as_str())
    }

    /// The instances of container `name`, newest first.
    pub fn instances<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a ContainerRecord> + use<'a> {
        self.containers
            .iter()
            .filter(move |container| container.name == name)
    }

    /// The newest instance of container `name` (what `kubectl logs` reads).
    pub fn container(&self, name: &str) -> Option<&ContainerRecord> {
        self.containers
            .iter()
            .find(|container| container.name == name)
    }

    /// The instance before the newest one (`kubectl logs --previous`).
    pub fn previous(&self, name: &str) -> Option<&ContainerRecord> {
        self.containers
            .iter()
            .filter(|container| container.name == name)
            .nth(1)
    }
}

/// Every pod the node runs at one moment, by UID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodsSnapshot {
    pods: BTreeMap<String, Arc<PodRecord>>,
}

impl PodsSnapshot {
    pub fn by_uid(&self, uid: &str) -> Option<&Arc<PodRecord>> {
        self.pods.get(uid)
    }

    /// The pod `namespace/name`; of two with that name (one deleted, its successor already
    /// bound) the one not being deleted.
    pub fn by_name(&self, namespace: &str, name: &str) -> Option<&Arc<PodRecord>> {
        self.pods
            .values()
            .filter(|pod| pod.namespace == namespace && pod.name == name)
            .min_by_key(|pod| pod.deleting)
    }

    /// The newest instance of container `container` of pod `namespace/pod`.
    pub fn container(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<&ContainerRecord> {
        self.by_name(namespace, pod)?.container(container)
    }

    pub fn pods(&self) -> impl Iterator<Item = &Arc<PodRecord>> {
        self.pods.values()
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

/// A reader's handle on the pods a node runs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PodsView {
    receiver: watch::Receiver<Arc<PodsSnapshot>>,
}

impl PodsView {
    /// A view nobody publishes to: a node that runs no pods on a container runtime.
    pub fn empty() -> Self {
        PodsPublisher::default().view()
    }

    /// The pods now. The snapshot does not change under the reader.
    pub fn snapshot(&self) -> Arc<PodsSnapshot> {
        Arc::clone(&self.receiver.borrow())
    }

    /// Waits for the next change; `false` once the publisher is gone (nothing changes again).
    pub async fn changed(&mut self) -> bool {
        self.receiver.changed().await.is_ok()
    }
}

/// The writer's side: the provider records each pod's change, and readers see a new snapshot
/// only when a record differs from the one published.
#[derive(Debug, Clone)]
pub struct PodsPublisher {
    sender: Arc<watch::Sender<Arc<PodsSnapshot>>>,
}

impl Default for PodsPublisher {
    fn default() -> Self {
        Self {
            sender: Arc::new(watch::Sender::new(Arc::default())),
        }
    }
}

impl PodsPublisher {
    pub fn view(&self) -> PodsView {
        PodsView {
            receiver: self.sender.subscribe(),
        }
    }

    /// Publishes `record` under its UID, unless it is what readers already see.
    pub fn record(&self, record: PodRecord) {
        self.sender.send_if_modified(|snapshot| {
            if snapshot.pods.get(&record.uid).map(Arc::as_ref) == Some(&record) {
                return false;
            }
            let pods = &mut Arc::make_mut(snapshot).pods;
            pods.insert(record.uid.clone(), Arc::new(record));
            true
        });
    }

    /// The pod `uid` is no longer the node's.
    pub fn forget(&self, uid: &str) {
        self.sender.send_if_modified(|snapshot| {
            if !snapshot.pods.contains_key(uid) {
                return false;
            }
            Arc::make_mut(snapshot).pods.remove(uid);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(uid: &str, name: &str, deleting: bool) -> Pod {
        let mut metadata = json!({"uid": uid, "namespace": "default", "name": name});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({ "metadata": metadata })).unwrap()
    }

    fn container(name: &str, id: &str) -> ContainerRecord {
        ContainerRecord {
            name: name.to_owned(),
            id: id.to_owned(),
            state: ContainerState::Running,
            restart_count: 0,
            log_path: PathBuf::from(format!("/logs/{name}/0.log")),
            image: "busybox".to_owned(),
            image_ref: "sha256:1".to_owned(),
            created_at: None,
            started_at: None,
            finished_at: None,
            exit_code: None,
        }
    }

    #[test]
    fn an_unchanged_record_publishes_no_new_snapshot() {
        let publisher = PodsPublisher::default();
        let view = publisher.view();
        publisher.record(PodRecord::new(&pod("u1", "web", false)));
        let first = view.snapshot();
        publisher.record(PodRecord::new(&pod("u1", "web", false)));
        assert!(Arc::ptr_eq(&first, &view.snapshot()), "the same snapshot");
        publisher.record(PodRecord::new(&pod("u1", "web", true)));
        assert!(view.snapshot().by_uid("u1").unwrap().deleting);
        assert!(
            !first.by_uid("u1").unwrap().deleting,
            "a held snapshot stays"
        );
    }

    #[test]
    fn a_forgotten_pod_leaves_the_view_and_forgetting_it_again_changes_nothing() {
        let publisher = PodsPublisher::default();
        let mut view = publisher.view();
        publisher.record(PodRecord::new(&pod("u1", "web", false)));
        assert!(view.receiver.has_changed().unwrap());
        view.receiver.mark_unchanged();
        publisher.forget("u1");
        assert!(view.snapshot().is_empty());
        view.receiver.mark_unchanged();
        publisher.forget("u1");
        assert!(!view.receiver.has_changed().unwrap());
    }

    #[test]
    fn lookups_by_name_prefer_the_pod_not_being_deleted_and_the_newest_instance() {
        let publisher = PodsPublisher::default();
        let mut old = PodRecord::new(&pod("u1", "web", true));
        old.containers = vec![container("app", "old")];
        let mut new = PodRecord::new(&pod("u2", "web", false));
        new.sandboxes = vec![SandboxRecord {
            id: "s2".to_owned(),
            ready: true,
            created_at: None,
        }];
        new.containers = vec![container("app", "c2"), container("app", "c1")];
        publisher.record(old);
        publisher.record(new);
        let snapshot = publisher.view().snapshot();
        let web = snapshot.by_name("default", "web").unwrap();
        assert_eq!((web.uid.as_str(), web.sandbox_id()), ("u2", Some("s2")));
        assert_eq!(
            snapshot.container("default", "web", "app").unwrap().id,
            "c2"
        );
        assert_eq!(web.previous("app").unwrap().id, "c1");
        assert!(snapshot.container("default", "web", "sidecar").is_none());
        assert!(snapshot.by_name("other", "web").is_none());
    }
}
