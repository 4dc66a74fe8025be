//! One renewal round, as the kubelet's lease controller runs it: update from the cached Lease;
//! on failure fall back to `ensure` (GET, or create when missing, retrying with backoff until
//! it succeeds) and update from that. Conflicts refresh the base and retry without counting as
//! heartbeat failures; other failures from the second attempt on reset the heartbeat
//! connections. Deviation, on purpose: a renewal is never skipped because the Node's UID is
//! unknown (the owner reference is added later); only a create waits for it.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;

use super::renewal::{
    MAX_UPDATE_ATTEMPTS, ensure_backoff, has_owner, new_lease, next_renew_time, renew_interval,
    renewal_of,
};
use crate::ports::{ApiError, LeaseApi, warn_unless_unreachable};

/// What a round works with.
#[derive(Clone)]
pub struct RoundContext {
    pub api: Arc<dyn LeaseApi>,
    pub node: String,
    pub lease_duration_seconds: i32,
    /// The wall clock; an argument so tests can step it.
    pub now: crate::clock::WallClock,
}

/// Why a round failed. Retrying helps: the next round starts from the API server's Lease.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RoundError {
    /// The Lease to renew has no name or resourceVersion (a corrupt answer).
    #[error("the cached lease has no name or resourceVersion")]
    Unrenewable,
    /// Every write of one update loop failed; the last failure says why.
    #[error("failed {attempts} attempts to update lease: {last}")]
    Updates {
        attempts: u32,
        #[source]
        last: ApiError,
    },
}

/// Why the Lease could not be read or created; the ensure loop retries until it can.
#[derive(Debug, thiserror::Error)]
enum EnsureError {
    #[error("the Node's UID is not known yet, and a lease is never created without its owner")]
    NoOwner,
    #[error("get lease: {0}")]
    Get(#[source] ApiError),
    #[error("create lease: {0}")]
    Create(#[source] ApiError),
}

/// How a round ended.
#[derive(Debug, Clone)]
pub struct RoundOutcome {
    /// The newest Lease the server returned, to base the next round on.
    pub latest: Option<Lease>,
    pub node_uid: Option<String>,
    /// Requests that wrote (or tried to write) the Lease.
    pub writes: u32,
    pub result: Result<(), RoundError>,
}

pub async fn renew(
    context: RoundContext,
    cached: Option<Lease>,
    node_uid: Option<String>,
) -> RoundOutcome {
    let mut round = Round {
        context,
        node_uid,
        writes: 0,
    };
    if let Some(base) = cached {
        match round.update(base).await {
            Ok(lease) => return round.finish(Some(lease), Ok(())),
            Err(error) => {
                warn_unless_unreachable!(round.context.api.recovery(), %error, "failed to update lease using latest lease, fallback to ensure lease")
            }
        }
    }
    let (lease, created) = round.ensure().await;
    if created {
        return round.finish(Some(lease), Ok(()));
    }
    match round.update(lease.clone()).await {
        Ok(renewed) => round.finish(Some(renewed), Ok(())),
        Err(error) => round.finish(Some(lease), Err(error)),
    }
}

struct Round {
    context: RoundContext,
    node_uid: Option<String>,
    writes: u32,
}

impl Round {
    fn finish(self, latest: Option<Lease>, result: Result<(), RoundError>) -> RoundOutcome {
        RoundOutcome {
            latest,
            node_uid: self.node_uid,
            writes: self.writes,
            result,
        }
    }

    /// `retryUpdateLease`: at most five writes based on `base`.
    async fn update(&mut self, mut base: Lease) -> Result<Lease, RoundError> {
        let mut last_error = None;
        for attempt in 0..MAX_UPDATE_ATTEMPTS {
            if !has_owner(&base) {
                self.learn_node_uid().await;
            }
            let now = (self.context.now)();
            let Some(renewal) = renewal_of(
                &base,
                self.context.lease_duration_seconds,
                now,
                self.node_uid.as_deref(),
            ) else {
                return Err(RoundError::Unrenewable);
            };
            self.writes += 1;
            match self.context.api.renew_lease(renewal).await {
                Ok(lease) => return Ok(lease),
                Err(ApiError::Conflict(message)) => {
                    // Someone else wrote the Lease: re-read it and try again at once. Not a
                    // heartbeat failure, so the connections stay.
                    tracing::debug!(%message, "lease conflict; refreshing");
                    base = self.ensure().await.0;
                    last_error = Some(ApiError::Conflict(message));
                }
                Err(error) => {
                    if attempt > 0 {
                        self.context.api.reset_heartbeat_connections();
                    }
                    last_error = Some(error);
                }
            }
        }
        Err(RoundError::Updates {
            attempts: MAX_UPDATE_ATTEMPTS,
            // The loop ran at least once (MAX_UPDATE_ATTEMPTS is positive) and every pass that
            // did not return set it.
            last: last_error.unwrap_or_else(|| ApiError::Incomplete("no update attempted".into())),
        })
    }

    /// `backoffEnsureLease`: the Lease from the server, created if missing; retries with
    /// backoff until it has one, at once when the API server comes back. The flag says whether it was just created. Deviations, on
    /// purpose: the wait never exceeds the renew interval (the kubelet's fixed 7 s cap would
    /// hold a short-interval node back a whole round after an outage), and from the second
    /// failure on the heartbeat connections are reset, as a failed update does.
    async fn ensure(&mut self) -> (Lease, bool) {
        let mut failures = 0;
        let interval = renew_interval(self.context.lease_duration_seconds);
        // Subscribed before the first try, so a recovery between a failure and its wait counts.
        let mut recovery = self.context.api.recovery();
        loop {
            match self.try_ensure().await {
                Ok(found) => return found,
                Err(error) => {
                    if failures >= 1 {
                        self.context.api.reset_heartbeat_connections();
                    }
                    let wait = ensure_backoff(failures).min(interval);
                    warn_unless_unreachable!(recovery, %error, ?wait, "failed to ensure the node lease exists; will retry");
                    if recovery.sleep(wait).await {
                        tracing::debug!("the API server is back; ensuring the lease now");
                    }
                    failures += 1;
                }
            }
        }
    }

    async fn try_ensure(&mut self) -> Result<(Lease, bool), EnsureError> {
        match self.context.api.get_lease(&self.context.node).await {
            Ok(lease) => Ok((lease, false)),
            Err(ApiError::NotFound(_)) => {
                self.learn_node_uid().await;
                let uid = self.node_uid.clone().ok_or(EnsureError::NoOwner)?;
                let renew_time = next_renew_time(None, (self.context.now)());
                let lease = new_lease(
                    &self.context.node,
                    self.context.lease_duration_seconds,
                    renew_time,
                    &uid,
                );
                self.writes += 1;
                self.context
                    .api
                    .create_lease(lease)
                    .await
                    .map(|created| (created, true))
                    .map_err(EnsureError::Create)
            }
            Err(error) => Err(EnsureError::Get(error)),
        }
    }

    async fn learn_node_uid(&mut self) {
        if self.node_uid.is_some() {
            return;
        }
        match self.context.api.node_uid(&self.context.node).await {
            Ok(uid) => self.node_uid = Some(uid),
            Err(error) => tracing::debug!(%error, "the Node's UID is not known yet"),
        }
    }
}
