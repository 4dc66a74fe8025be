//! The debug view of a supervised actor: lifecycle and mailbox figures with stable field names,
//! as served by `GET /debug/actors` and rendered as metrics.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::{
    child::{ChildState, ChildStatus, Failure},
    stats::MailboxSnapshot,
};

/// One actor's figures at the moment of reading. Deserializable, so clients of the debug
/// endpoint (the tests) read it typed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActorSnapshot {
    pub name: String,
    pub node: String,
    pub state: ChildState,
    pub restarts: u64,
    pub last_failure: Option<Failure>,
    pub backoff_until: Option<String>,
    /// Seconds since the actor last had a running instance; absent while it has one.
    pub down_seconds: Option<f64>,
    /// Times the running instance's task was woken (a message, a timer, a debug request):
    /// an idle actor's count stands still. Absent while no instance runs.
    pub wakeups: Option<u64>,
    #[serde(flatten)]
    pub mailbox: MailboxSnapshot,
}

pub(crate) fn snapshot(status: &ChildStatus, node: &str) -> ActorSnapshot {
    let (last_failure, backoff_until, down_seconds, wakeups) = {
        let detail = status.detail();
        let running = detail.down_since.is_none();
        (
            detail.last_failure.clone(),
            detail.backoff_until.map(format_time),
            detail.down_since.map(|since| {
                Instant::now()
                    .saturating_duration_since(since)
                    .as_secs_f64()
            }),
            detail
                .liveness
                .as_ref()
                .filter(|_| running)
                .map(|liveness| liveness.polls()),
        )
    };
    ActorSnapshot {
        name: status.name.clone(),
        node: node.to_owned(),
        state: status.state(),
        restarts: status.restarts.load(std::sync::atomic::Ordering::Relaxed),
        last_failure,
        backoff_until,
        down_seconds,
        wakeups,
        mailbox: status.stats.snapshot(status.depth()),
    }
}

pub(crate) fn format_time(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

impl ChildState {
    /// Whether the debug endpoint should report this child as a health problem when it has
    /// been down for `down_seconds`.
    pub(crate) fn is_unhealthy(self, down_seconds: Option<f64>, limit_seconds: f64) -> bool {
        match self {
            Self::Escalated => true,
            Self::Running | Self::Stopped => false,
            Self::Starting | Self::Backoff => down_seconds.is_some_and(|down| down > limit_seconds),
        }
    }
}
