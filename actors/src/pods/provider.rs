//! The pod lifecycle provider: what decides what each pod's containers are doing (a simulation
//! here; on a container runtime, the `nodepulse-cri` crate's) and says so as [`PodUpdate`]s for StatusManager. It
//! is driven by the pod watch, evictions and a timer set to its own next due time (none when
//! nothing is due), and lives outside the actor instance — with the updates not yet delivered
//! — so a restart of the actor loses nothing.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::{
    kept_pod::KeptPod,
    messages::StopPod,
    ports::{PodEvent, PodStats, PodStatsSource},
    prober::ProberOutput,
};

/// What a provider wants StatusManagerActor told.
#[derive(Debug, Clone, PartialEq)]
pub enum PodUpdate {
    /// `SetPodStatus`.
    Status {
        pod: KeptPod,
        status: Box<PodStatus>,
    },
    /// `SetContainerReadiness`.
    Readiness {
        pod_uid: String,
        container_id: String,
        ready: bool,
    },
    /// `TerminatePod`: the pod's containers are gone for good.
    Terminated { pod: KeptPod },
    /// An Event about the pod (Pulled, Created, Started, ...), recorded through the same
    /// events path as the volume manager's, after the updates queued before it.
    Event { pod: Arc<Pod>, event: PodEvent },
}

/// Fault injection into a provider's own tasks, as the supervisor's kill modes are for the
/// actors: which task panics next. Only a provider with tasks of its own (the CRI engine) takes
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderFault {
    /// The next round of this pod's worker.
    PodWorker { pod_uid: String },
    /// The next pass of the PLEG (the pod lifecycle event generator, which relists the runtime).
    Pleg,
}

/// How a provider that works asynchronously tells the actor that updates wait for `tick`.
pub type UpdateSink = Arc<dyn Fn() + Send + Sync>;

pub trait PodLifecycleProvider: Send + 'static {
    /// A pod bound to this node, as the API has it now (listed, added or modified); keep the
    /// `KeptPod`, not the decoded pod, where it is kept long: the watch and StatusManager hold
    /// the same one.
    fn pod_applied(&mut self, pod: &KeptPod, now: Timestamp) -> Vec<PodUpdate>;
    /// The pod is gone from the API: forget it and free what it held.
    fn pod_deleted(&mut self, pod: &Pod);
    /// Every pod bound to the node has been reported (`PodWatchEvent::Listed`): a pod not
    /// reported is not there, so what the runtime holds for it may go.
    fn pods_listed(&mut self) {}
    /// What has come due by `now` (scripted exits, pods waiting for an address).
    fn tick(&mut self, now: Timestamp) -> Vec<PodUpdate>;
    /// When [`tick`](Self::tick) next has something to do; `None` when nothing is due until
    /// the next event (a watch event, an eviction, a CIDR or volume change), so an idle node's
    /// actor is never woken. A time already past means at once. Asked after every event and
    /// tick, so the answer only has to hold until then.
    fn next_wakeup(&self) -> Option<Timestamp>;
    /// Stops the pod's containers for good and ends it as `stop` says (an eviction).
    fn stop_pod(&mut self, stop: &StopPod, now: Timestamp) -> Vec<PodUpdate>;
    /// The Node's `spec.podCIDRs` (joined with ",") changed.
    fn set_pod_cidrs(&mut self, cidrs: &str, now: Timestamp) -> Vec<PodUpdate>;
    /// The volume manager says the readiness of `pod_uid`'s volumes may have changed (see
    /// `volume_manager::PodVolumeView`): a pod waiting for its volumes may start now, or report why not.
    fn volumes_changed(&mut self, _pod_uid: &str, _now: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    /// What the prober published for one of its pods (readiness, startup, a kill, an event):
    /// a provider that runs containers acts on it; others have no prober and ignore it.
    fn prober_output(&mut self, _output: &ProberOutput, _now: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    /// Where to signal that updates wait; each actor instance hands over its own on start.
    /// Providers that answer only when called ignore it.
    fn set_update_sink(&mut self, _sink: UpdateSink) {}
    /// nodepulse is shutting down: stop acting on the pods. What runs keeps running, as when
    /// the kubelet stops, and the next nodepulse adopts it.
    fn stop(&mut self) {}
    /// Fault injection: arms `fault` in the provider's own tasks; whether it has such tasks
    /// (only the CRI provider does).
    fn inject_fault(&mut self, _fault: ProviderFault) -> bool {
        false
    }
    /// The pods that may still run, with what they use.
    fn active_pods(&self) -> Vec<PodStats>;
    fn debug_state(&self) -> serde_json::Value;
}

/// One message for StatusManagerActor, in the order it must arrive.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// The pod as the watch saw it (`PodObserved`).
    Observed(KeptPod),
    /// The pod is gone (`PodGone`).
    Gone(String),
    Update(PodUpdate),
}

/// The provider and the messages not yet delivered: shared by every instance of the actor.
pub struct PodLifecycleState {
    provider: Mutex<Box<dyn PodLifecycleProvider>>,
    outbox: Mutex<VecDeque<Outgoing>>,
}

impl PodLifecycleState {
    pub fn new(provider: impl PodLifecycleProvider) -> Self {
        Self {
            provider: Mutex::new(Box::new(provider)),
            outbox: Mutex::new(VecDeque::new()),
        }
    }

    /// The provider; a panic while it was held left it as consistent as any single step does.
    pub fn provider(&self) -> MutexGuard<'_, Box<dyn PodLifecycleProvider>> {
        self.provider.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn outbox(&self) -> MutexGuard<'_, VecDeque<Outgoing>> {
        self.outbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `updates` for delivery, after whatever is already queued.
    pub fn queue(&self, updates: impl IntoIterator<Item = Outgoing>) {
        self.outbox().extend(updates);
    }
}

impl PodStatsSource for PodLifecycleState {
    fn active_pods(&self) -> Vec<PodStats> {
        self.provider().active_pods()
    }
}
