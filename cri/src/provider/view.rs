//! What the runtime holds for one pod, as the PLEG last saw it: its sandboxes and containers
//! with their CRI statuses, newest first, found by the kubelet's labels. The kubelet's label
//! and annotation names live here, since they are how a restarted nodepulse finds its pods.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use nodepulse_actors::ports::{
    ContainerRecord, ContainerState, ContainerStatus, ContainerSummary, Labels, PodRecord,
    SandboxRecord, SandboxState, SandboxStatus, SandboxSummary,
};

pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
pub const TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
pub const TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
pub const TERMINATION_GRACE_ANNOTATION: &str = "io.kubernetes.pod.terminationGracePeriod";

/// A listing's sandboxes and containers grouped by the pod UID they carry, in one walk over each
/// (those without one are left out), in UID order.
pub type ListingByPod<'a> = BTreeMap<&'a str, (Vec<&'a SandboxSummary>, Vec<&'a ContainerSummary>)>;

pub fn by_pod<'a>(
    sandboxes: &'a [SandboxSummary],
    containers: &'a [ContainerSummary],
) -> ListingByPod<'a> {
    let mut by_pod = ListingByPod::new();
    for sandbox in sandboxes {
        if let Some(uid) = pod_uid(&sandbox.labels) {
            by_pod.entry(uid).or_default().0.push(sandbox);
        }
    }
    for container in containers {
        if let Some(uid) = pod_uid(&container.labels) {
            by_pod.entry(uid).or_default().1.push(container);
        }
    }
    by_pod
}

/// The pod UID a sandbox or container carries, if it is one of the kubelet's (or ours).
pub fn pod_uid(labels: &Labels) -> Option<&str> {
    labels.get(POD_UID_LABEL).map(String::as_str)
}

/// One pod's sandboxes and containers, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRuntime {
    pub sandboxes: Vec<SandboxStatus>,
    pub containers: Vec<ContainerStatus>,
}

/// What changed between two listings is judged on ids and states only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    sandboxes: Vec<(String, bool)>,
    containers: Vec<(String, &'static str)>,
}

fn state_name(state: ContainerState) -> &'static str {
    match state {
        ContainerState::Created => "created",
        ContainerState::Running => "running",
        ContainerState::Exited => "exited",
        ContainerState::Unknown => "unknown",
    }
}

impl Fingerprint {
    /// From (id, ready) of each sandbox and (id, state) of each container, in any order.
    fn new(
        sandboxes: impl Iterator<Item = (String, bool)>,
        containers: impl Iterator<Item = (String, ContainerState)>,
    ) -> Self {
        let mut print = Self {
            sandboxes: sandboxes.collect(),
            containers: containers
                .map(|(id, state)| (id, state_name(state)))
                .collect(),
        };
        print.sandboxes.sort();
        print.containers.sort();
        print
    }

    pub fn of_listing(sandboxes: &[&SandboxSummary], containers: &[&ContainerSummary]) -> Self {
        Self::new(
            sandboxes
                .iter()
                .map(|s| (s.id.clone(), s.state == SandboxState::Ready)),
            containers.iter().map(|c| (c.id.clone(), c.state)),
        )
    }
}

impl PodRuntime {
    /// Sorts both lists newest first. They are kept until the pod's next inspection, so
    /// without the room they were pushed into (four statuses of a few hundred bytes each,
    /// most pods having one sandbox and one container).
    pub fn new(mut sandboxes: Vec<SandboxStatus>, mut containers: Vec<ContainerStatus>) -> Self {
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        sandboxes.shrink_to_fit();
        containers.shrink_to_fit();
        Self {
            sandboxes,
            containers,
        }
    }

    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::new(
            self.sandboxes
                .iter()
                .map(|s| (s.id.clone(), s.state == SandboxState::Ready)),
            self.containers.iter().map(|c| (c.id.clone(), c.state)),
        )
    }

    pub fn newest_sandbox(&self) -> Option<&SandboxStatus> {
        self.sandboxes.first()
    }

    /// The newest sandbox when it is ready: the one containers are created in.
    pub fn ready_sandbox(&self) -> Option<&SandboxStatus> {
        self.newest_sandbox()
            .filter(|sandbox| sandbox.state == SandboxState::Ready)
    }

    /// The instances of container `name`, newest first.
    pub fn instances<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a ContainerStatus> {
        self.containers
            .iter()
            .filter(move |container| container_name(container) == name)
    }

    pub fn newest(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers
            .iter()
            .find(|container| container_name(container) == name)
    }

    pub fn any_running(&self) -> bool {
        self.containers
            .iter()
            .any(|container| container.state == ContainerState::Running)
    }

    /// What the node's `PodsView` shows of `pod`: its names, and the IDs, states and log
    /// paths of what the runtime holds for it.
    pub fn record(&self, pod: &Pod) -> PodRecord {
        let sandboxes = self.sandboxes.iter().map(|sandbox| SandboxRecord {
            id: sandbox.id.clone(),
            ready: sandbox.state == SandboxState::Ready,
            created_at: timestamp(sandbox.created_at),
        });
        let containers = self.containers.iter().map(|status| ContainerRecord {
            name: container_name(status).to_owned(),
            id: status.id.clone(),
            state: status.state,
            restart_count: restart_count(status),
            log_path: status.log_path.clone(),
            image: status.image.clone(),
            image_ref: status.image_ref.clone(),
            created_at: timestamp(status.created_at),
            started_at: timestamp(status.started_at),
            finished_at: timestamp(status.finished_at),
            exit_code: (status.state == ContainerState::Exited).then_some(status.exit_code),
        });
        PodRecord {
            sandboxes: sandboxes.collect(),
            containers: containers.collect(),
            ..PodRecord::new(pod)
        }
    }
}

/// CRI's nanoseconds since the epoch; 0 (not reached) is `None`.
fn timestamp(nanos: i64) -> Option<Timestamp> {
    (nanos > 0)
        .then(|| Timestamp::from_nanosecond(i128::from(nanos)).ok())
        .flatten()
}

/// The container's name in the pod spec: its label, else the CRI metadata name.
pub fn container_name(status: &ContainerStatus) -> &str {
    labelled_name(&status.labels, &status.name)
}

/// The spec's container name from the kubelet's label, else the runtime's `name`.
pub fn labelled_name<'a>(labels: &'a Labels, name: &'a str) -> &'a str {
    labels
        .get(CONTAINER_NAME_LABEL)
        .map_or(name, String::as_str)
}

/// The restart count the kubelet keeps in the container's annotation.
pub fn restart_count(status: &ContainerStatus) -> u32 {
    status
        .annotations
        .get(RESTART_COUNT_ANNOTATION)
        .and_then(|count| count.parse().ok())
        .unwrap_or(status.attempt)
}

/// `<name>_<namespace>(<uid>)`, as the kubelet names a pod in messages.
pub(super) fn pod_label(pod: &Pod) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}({})",
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::PodRuntime;
    use nodepulse_actors::ports::{SandboxMetadata, SandboxState, SandboxStatus};

    #[test]
    fn a_pods_runtime_is_kept_without_room_beyond_its_statuses() {
        let sandbox = |id: &str, created_at| SandboxStatus {
            id: id.to_owned(),
            metadata: SandboxMetadata::default(),
            state: SandboxState::Ready,
            created_at,
            ips: Vec::new(),
            labels: Default::default(),
            annotations: Default::default(),
        };
        let mut sandboxes = Vec::with_capacity(4);
        sandboxes.extend([sandbox("old", 1), sandbox("new", 2)]);
        let runtime = PodRuntime::new(sandboxes, Vec::with_capacity(4));
        assert_eq!(runtime.sandboxes[0].id, "new", "newest first");
        assert_eq!(runtime.sandboxes.capacity(), 2);
        assert_eq!(runtime.containers.capacity(), 0);
    }
}
