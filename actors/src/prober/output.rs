//! What the prober tells the rest of the node: readiness for the StatusManager, a container's
//! startup, a typed "kill and restart this container" request with the kubelet's `Killing`
//! text and grace period, and the `Unhealthy`/`ProbeWarning` events to record.

use nodepulse_supervisor::Kept;

use super::{
    manager::{ProberMemory, WorkerKey},
    spec::{ProbeKind, ProbeSettings},
    worker::{ProbeEvent, ProbeResult, Recorded, Reported},
};
use crate::{messages::SetContainerReadiness, ports::ProbeTarget};

/// The pod's `terminationGracePeriodSeconds` when the spec leaves it out.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// One thing the prober asks the node to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ProberOutput {
    /// To StatusManagerActor as is.
    Readiness(SetContainerReadiness),
    /// The startup probe succeeded: the container counts as started.
    Started {
        pod_uid: String,
        container_id: String,
    },
    /// Liveness or startup failed past its threshold.
    Restart(RestartContainer),
    /// A Warning event on the pod.
    Event { pod_uid: String, event: ProbeEvent },
}

/// Kill the container with `grace_period_seconds` and let the restart policy decide the rest;
/// record Normal `Killing` with `killing_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartContainer {
    pub pod_uid: String,
    pub container_name: String,
    pub container_id: String,
    pub kind: ProbeKind,
    pub grace_period_seconds: i64,
    pub killing_message: String,
}

/// What a worker knows about its probe and its container.
#[derive(Debug, Clone)]
pub(super) struct WorkerContext {
    pub key: WorkerKey,
    pub settings: ProbeSettings,
    pub target: ProbeTarget,
    pub started_at: tokio::time::Instant,
    pub has_startup_probe: bool,
    pub restart_never: bool,
    pub pod_grace_seconds: Option<i64>,
    pub reported: Reported,
    /// Notified when the container's startup probe succeeds (readiness runs at once).
    pub started: std::sync::Arc<tokio::sync::Notify>,
}

impl WorkerContext {
    pub fn readiness(&self, ready: bool) -> ProberOutput {
        ProberOutput::Readiness(SetContainerReadiness {
            pod_uid: self.key.pod_uid.clone(),
            container_id: self.target.container_id.clone(),
            ready,
        })
    }

    /// Whether this container's startup probe has published Success (§5.4).
    pub fn startup_succeeded(&self, memory: &Kept<ProberMemory>) -> bool {
        let startup = WorkerKey {
            kind: ProbeKind::Startup,
            ..self.key.clone()
        };
        memory.read(|memory| {
            memory.get(&startup).is_some_and(|m| {
                m.container_id == self.target.container_id
                    && m.published == Some(ProbeResult::Success)
            })
        })
    }

    /// The messages one recorded outcome leads to, the event first as the kubelet records it.
    pub fn outputs(&self, recorded: Recorded) -> Vec<ProberOutput> {
        let mut outputs = Vec::new();
        if let Some(event) = recorded.event {
            outputs.push(ProberOutput::Event {
                pod_uid: self.key.pod_uid.clone(),
                event,
            });
        }
        let Some(result) = recorded.published else {
            return outputs;
        };
        match (self.key.kind, result) {
            (ProbeKind::Readiness, result) => {
                outputs.push(self.readiness(result == ProbeResult::Success))
            }
            (ProbeKind::Startup, ProbeResult::Success) => outputs.push(ProberOutput::Started {
                pod_uid: self.key.pod_uid.clone(),
                container_id: self.target.container_id.clone(),
            }),
            (ProbeKind::Liveness, ProbeResult::Success) => {}
            (kind, ProbeResult::Failure) => outputs.push(ProberOutput::Restart(self.restart(kind))),
        }
        outputs
    }

    fn restart(&self, kind: ProbeKind) -> RestartContainer {
        let name = &self.key.container;
        let probe = kind.title().to_lowercase();
        let mut killing_message = format!("Container {name} failed {probe} probe");
        if !self.restart_never {
            killing_message.push_str(", will be restarted");
        }
        RestartContainer {
            pod_uid: self.key.pod_uid.clone(),
            container_name: name.clone(),
            container_id: self.target.container_id.clone(),
            kind,
            grace_period_seconds: (self.settings.termination_grace_seconds)
                .or(self.pod_grace_seconds)
                .unwrap_or(DEFAULT_GRACE_SECONDS),
            killing_message,
        }
    }
}
