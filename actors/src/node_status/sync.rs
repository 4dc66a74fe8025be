//! The node-status work that talks to the API server, as owned futures the actor spawns:
//! registration (create, or adopt the existing Node, retried with backoff until it works) and
//! one status sync (up to five attempts: the first from the cached Node, the rest after a live
//! GET; a missing Node means it must be registered again).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use tokio::time::Instant;

use super::{
    change::status_changed,
    patch::status_patch,
    registration::{RegistrationSettings, initial_node, reconcile, registration_backoff},
    report::ReportClock,
    setters::{SetterReport, StatusInputs, StatusSettings, platform, run_setters},
};
use crate::{
    messages::{PressureChanged, RuntimeHealth},
    ports::{ApiError, MachineInfo, NodeApi, NodeEvent, warn_unless_unreachable},
};

/// Back-to-back status attempts per sync (`nodeStatusUpdateRetry`).
pub const STATUS_ATTEMPTS: u32 = 5;

/// Everything one status computation needs, owned so a spawned future can carry it.
#[derive(Clone)]
pub struct StatusJob {
    pub node_name: String,
    pub machine: MachineInfo,
    pub status: Arc<StatusSettings>,
    pub registration: Arc<RegistrationSettings>,
    pub runtime: Option<RuntimeHealth>,
    pub pressure: Option<PressureChanged>,
    pub previous_boot_id: Option<String>,
    pub volumes_in_use: Option<Vec<String>>,
    pub now: Timestamp,
    pub now_instant: Instant,
    /// The unhealthy health checks at `now_instant`.
    pub health: Vec<String>,
}

impl StatusJob {
    /// `base` with the os/arch labels ensured and every setter applied; the flag says whether
    /// labels had to be fixed (which counts as a change).
    pub fn compute(&self, base: &Node) -> (Node, SetterReport, bool) {
        let mut node = base.clone();
        let (os, arch) = platform();
        let labels = node.metadata.labels.get_or_insert_with(Default::default);
        let mut labels_fixed = false;
        for (key, value) in [("kubernetes.io/os", os), ("kubernetes.io/arch", arch)] {
            if labels.get(key).map(String::as_str) != Some(value) {
                labels.insert(key.to_owned(), value.to_owned());
                labels_fixed = true;
            }
        }
        let inputs = StatusInputs {
            node_name: &self.node_name,
            machine: &self.machine,
            settings: &self.status,
            runtime: self.runtime.as_ref(),
            pressure: self.pressure.as_ref(),
            previous_boot_id: self.previous_boot_id.as_deref(),
            now_instant: self.now_instant,
            health: &self.health,
            volumes_in_use: self.volumes_in_use.as_deref(),
        };
        let report = run_setters(&inputs, self.now, &mut node);
        (node, report, labels_fixed)
    }
}

/// A registered (created or adopted) Node and the events to record for it.
pub struct Registered {
    pub node: Node,
    pub adopted: bool,
    pub events: Vec<NodeEvent>,
}

/// Registers the Node, retrying forever with backoff, and at once when the API server comes
/// back. The first attempt is immediate (the kubelet sleeps 100 ms first; starting at once
/// shortens time to Ready).
pub async fn register(api: Arc<dyn NodeApi>, job: StatusJob) -> Registered {
    let mut failures = 0;
    let mut recovery = api.recovery();
    loop {
        match try_register(api.as_ref(), &job).await {
            Ok(registered) => return registered,
            Err(error) => {
                let wait = registration_backoff(failures);
                warn_unless_unreachable!(recovery, %error, ?wait, "unable to register node with API server; will retry");
                recovery.sleep(wait).await;
                failures += 1;
            }
        }
    }
}

async fn try_register(api: &dyn NodeApi, job: &StatusJob) -> Result<Registered, ApiError> {
    let (candidate, report, _) = job.compute(&initial_node(&job.node_name, &job.registration));
    match api.create_node(candidate.clone()).await {
        Ok(node) => {
            tracing::info!("successfully registered node");
            Ok(Registered {
                node,
                adopted: false,
                events: report.events,
            })
        }
        Err(ApiError::AlreadyExists(_)) => {
            let existing = api.get_node(&job.node_name).await?;
            let (adopted, changed) = reconcile(&existing, &candidate);
            let node = match status_patch(&existing, &adopted).filter(|_| changed) {
                Some(patch) => api.patch_node_status(&job.node_name, patch).await?,
                None => existing,
            };
            tracing::info!(reconciled = changed, "adopted the existing node");
            Ok(Registered {
                node,
                adopted: true,
                events: report.events,
            })
        }
        Err(error) => Err(error),
    }
}

/// How one status sync ended.
pub enum SyncOutcome {
    /// The status was sent; `node` is what the server returned.
    Patched {
        node: Box<Node>,
        computed: Box<Node>,
        patch: Value,
        changed: bool,
        events: Vec<NodeEvent>,
    },
    /// A report was due but the server already holds exactly this status: nothing to send,
    /// and it counts as reported.
    UpToDate { computed: Box<Node> },
    /// Nothing changed and no report was due: nothing was sent.
    NotDue { computed: Box<Node> },
    /// The Node is gone: register it again.
    NodeMissing,
    /// Every attempt failed; the next tick tries again.
    Failed(StatusSyncError),
}

/// Why a status sync gave up, after `STATUS_ATTEMPTS` tries (the kubelet's
/// `nodeStatusUpdateRetry`), with the last attempt's API error as the source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StatusSyncError {
    #[error("update node status exceeds retry count: error getting node {node:?}: {source}")]
    GetNode {
        node: String,
        #[source]
        source: ApiError,
    },
    #[error(
        "update node status exceeds retry count: failed to patch status for node {node:?}: {source}"
    )]
    PatchStatus {
        node: String,
        #[source]
        source: ApiError,
    },
}

impl StatusSyncError {
    /// Whether the last call, made again, can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::GetNode { source, .. } | Self::PatchStatus { source, .. } => {
                source.is_retryable()
            }
        }
    }
}

/// One status sync. `force` (a changed pod CIDR) makes it report as if the status had changed.
/// Its first attempt works on `cached`, or reads the Node first when there is none to trust
/// (the watch saw no Node: deleted, or listed before the registration landed).
pub async fn sync_status(
    api: Arc<dyn NodeApi>,
    job: StatusJob,
    cached: Option<Arc<Node>>,
    clock: ReportClock,
    frequency: std::time::Duration,
    force: bool,
) -> SyncOutcome {
    let mut attempt = 0;
    loop {
        let cached = cached.as_deref();
        match sync_attempt(&*api, &job, cached, &clock, frequency, force, attempt).await {
            Ok(outcome) => return outcome,
            Err(error) if attempt + 1 >= STATUS_ATTEMPTS => return SyncOutcome::Failed(error),
            Err(_) => attempt += 1,
        }
    }
}

/// One try of [`sync_status`]: the first works on the cached Node (when given), later ones
/// read it again.
async fn sync_attempt(
    api: &dyn NodeApi,
    job: &StatusJob,
    cached: Option<&Node>,
    clock: &ReportClock,
    frequency: std::time::Duration,
    force: bool,
    attempt: u32,
) -> Result<SyncOutcome, StatusSyncError> {
    let original = if let Some(cached) = cached.filter(|_| attempt == 0) {
        cached.clone()
    } else {
        match api.get_node(&job.node_name).await {
            Ok(node) => node,
            Err(ApiError::NotFound(_)) => return Ok(SyncOutcome::NodeMissing),
            Err(error) => {
                api.reset_heartbeat_connections();
                return Err(StatusSyncError::GetNode {
                    node: job.node_name.clone(),
                    source: error,
                });
            }
        }
    };
    let (computed, report, labels_fixed) = job.compute(&original);
    for error in &report.errors {
        tracing::warn!(%error, "a node status setter failed");
    }
    let changed = force
        || labels_fixed
        || status_changed(
            original.status.as_ref(),
            computed.status.as_ref().unwrap_or(&Default::default()),
        );
    if !clock.due(changed, job.now_instant, frequency) {
        return Ok(SyncOutcome::NotDue {
            computed: Box::new(computed),
        });
    }
    let Some(patch) = status_patch(&original, &computed) else {
        return Ok(SyncOutcome::UpToDate {
            computed: Box::new(computed),
        });
    };
    match api.patch_node_status(&job.node_name, patch.clone()).await {
        Ok(node) => Ok(SyncOutcome::Patched {
            node: Box::new(node),
            computed: Box::new(computed),
            patch,
            changed,
            events: report.events,
        }),
        Err(ApiError::NotFound(_)) => Ok(SyncOutcome::NodeMissing),
        Err(error) => {
            if attempt > 0 {
                api.reset_heartbeat_connections();
            }
            Err(StatusSyncError::PatchStatus {
                node: job.node_name.clone(),
                source: error,
            })
        }
    }
}
