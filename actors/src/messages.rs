//! The facts the actors tell each other, one type per fact.

use tokio::time::Instant;

use actix::Message;
use jiff::Timestamp;

/// NodeStatusActor → LeaseActor: the Node exists and has this UID, so the Lease can name it
/// as its owner (and be garbage-collected with it).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct NodeRegistered {
    pub uid: String,
}

/// RuntimeProbeActor → NodeStatusActor: the container runtime as last probed (the kubelet's
/// `runtimeState`). Sent on every change and at least every probe period, so NodeStatusActor
/// can judge staleness itself ("container runtime is down" after 30 s without a full success).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct RuntimeHealth {
    /// When a probe last fully succeeded (runtime reachable and RuntimeReady=true); `None`
    /// until the first success ("container runtime status check may not have completed yet").
    pub last_successful_probe: Option<Instant>,
    /// "container runtime not ready: RuntimeReady=false reason:… message:…", when so.
    pub runtime_error: Option<String>,
    /// "container runtime network not ready: NetworkReady=false reason:… message:…", when so;
    /// "network state unknown" before the first answer.
    pub network_error: Option<String>,
    /// `<runtimeName>://<version>` from CRI Version, for `nodeInfo.containerRuntimeVersion`.
    pub runtime_version: Option<String>,
    /// When this observation was made.
    pub observed_at: Timestamp,
    /// A simulated runtime (for simulated nodes), labelled as such in `/debug/node`.
    pub simulated: bool,
    /// The runtime's images as last listed (none for a simulated runtime), for the Node's
    /// `status.images`.
    pub images: Vec<crate::ports::ImageInfo>,
    /// The runtime's handlers and features, for `status.runtimeHandlers` and `status.features`.
    pub capabilities: crate::ports::RuntimeCapabilities,
}

/// One eviction signal as last observed, for `/debug/node` and the pressure events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalObservation {
    /// The kubelet's signal name, e.g. `memory.available`.
    pub signal: String,
    /// Available amount (bytes, inodes or PIDs).
    pub available: u64,
    pub capacity: u64,
    /// The threshold it is compared with, as configured (`100Mi`, `10%`).
    pub threshold: Option<String>,
    pub observed_at: Timestamp,
    /// Since when one of the signal's thresholds has been met without a break (the kubelet's
    /// "first observed" time); `None` while none is met.
    pub threshold_met_since: Option<Timestamp>,
}

/// EvictionSignalActor → NodeStatusActor: the pressure conditions after thresholds and the
/// transition period. Sent as soon as one of them changes, and periodically as freshness.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct PressureChanged {
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
    pub signals: Vec<SignalObservation>,
}

/// Pod lifecycle provider → StatusManagerActor: the status the pod's containers show now.
/// Carries the pod as the provider last saw it (UID, name, spec, deletionTimestamp).
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct SetPodStatus {
    pub pod: crate::kept_pod::KeptPod,
    pub status: k8s_openapi::api::core::v1::PodStatus,
}

/// Pod lifecycle provider → StatusManagerActor: a readiness probe of one container flipped.
/// Ignored unless the pod's status is already cached and has that container.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct SetContainerReadiness {
    pub pod_uid: String,
    /// `containerStatuses[].containerID`, e.g. `containerd://…`.
    pub container_id: String,
    pub ready: bool,
}

/// Pod lifecycle provider → StatusManagerActor: the pod's containers are gone for good; its
/// final status is written and, once the API has it and the pod is being deleted, the pod is
/// deleted (grace 0, UID precondition).
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct TerminatePod {
    pub pod: crate::kept_pod::KeptPod,
}

/// Pod lifecycle actor → StatusManagerActor: a pod bound to this node as the API has it now
/// (from the watch). Keeps StatusManager's view of the API fresh for the batch pass's
/// reconcile (a status edited behind nodepulse's back) and for the final delete.
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct PodObserved {
    pub pod: crate::kept_pod::KeptPod,
}

/// Pod lifecycle actor → StatusManagerActor: the pod with this UID is gone from the API; its
/// cached status is dropped (the kubelet's `RemoveOrphanedStatuses`).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct PodGone {
    pub uid: String,
}

/// EvictionSignalActor → StatusManagerActor: evict this pod to reclaim a starved resource.
/// StatusManager records the Warning event and asks the provider to stop the pod, whose final
/// status is phase Failed, reason `Evicted`, with this message.
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct EvictPod {
    pub pod: Box<k8s_openapi::api::core::v1::Pod>,
    /// "The node was low on resource: memory. Threshold quantity: …, available: …. Container …"
    pub message: String,
    /// The Event's annotations: `offending_containers`, `offending_containers_usage`,
    /// `starved_resource`.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// StatusManagerActor → pod lifecycle actor: stop the pod's containers for good and end it
/// with phase Failed and this reason and message (an eviction).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct StopPod {
    pub uid: String,
    pub reason: String,
    pub message: String,
}

/// The daemon → StatusManagerActor, at shutdown: send now every status the API lacks (those
/// whose last write failed too) and answer once none is left to try. The answer is how many
/// are still unsent, refused by the API, so the daemon can say what it could not flush; none
/// when the instance ended before it could answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Message)]
#[rtype(result = "Option<usize>")]
pub struct FlushPodStatuses;

/// NodeStatusActor → VolumeManagerActor: what the Node says that volumes depend on, sent when
/// it changes: `status.volumesAttached` (the attach/detach controller's word that an
/// attachable volume may be mounted) and `status.allocatable` (downwardAPI limits default to
/// it), in cores for `cpu` and bytes otherwise.
#[derive(Debug, Clone, PartialEq, Message)]
#[rtype(result = "()")]
pub struct NodeVolumeFacts {
    pub volumes_attached: Vec<String>,
    pub allocatable: std::collections::BTreeMap<String, f64>,
}

/// VolumeManagerActor → NodeStatusActor: `status.volumesInUse`, sorted; `None` until the
/// reconciler has synced once since start (the field is then left as found).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct VolumesInUse(pub Option<Vec<String>>);
