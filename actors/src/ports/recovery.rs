//! "The API server is back": the one signal every waiting retry listens to. The API adapter
//! sees every request's outcome and announces the first success after a run of failures; a
//! retry wait ([`ApiRecovery::sleep`]) or an actor's stream ([`ApiRecovery::stream`]) ends then,
//! each after its own short random delay so that thousands of waiters do not all fire at once.

use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::watch;

/// Every waiter resumes within this long after the API server answers again, at a random
/// point of it: a fleet's retries are spread over this window instead of landing together.
pub const RECOVERY_SPREAD: Duration = Duration::from_secs(1);

/// A subscription to the API server coming back. Cheap to clone; a clone waits for the next
/// recovery, not for one already past.
#[derive(Debug)]
pub struct ApiRecovery {
    recoveries: Option<watch::Receiver<u64>>,
    /// True while the API server is known to be unreachable.
    unreachable: Option<watch::Receiver<bool>>,
}

impl Clone for ApiRecovery {
    fn clone(&self) -> Self {
        let mut recoveries = self.recoveries.clone();
        if let Some(receiver) = recoveries.as_mut() {
            receiver.mark_unchanged();
        }
        Self {
            recoveries,
            unreachable: self.unreachable.clone(),
        }
    }
}

impl ApiRecovery {
    /// Listens to `recoveries`, a counter bumped at every recovery (counting from now on),
    /// and to `unreachable`, true while the server does not answer.
    pub fn new(mut recoveries: watch::Receiver<u64>, unreachable: watch::Receiver<bool>) -> Self {
        recoveries.mark_unchanged();
        Self {
            recoveries: Some(recoveries),
            unreachable: Some(unreachable),
        }
    }

    /// A subscription that never fires (a port with no notion of reachability: test fakes).
    pub fn never() -> Self {
        Self {
            recoveries: None,
            unreachable: None,
        }
    }

    /// Whether the API server is known not to answer now. Its adapter has then logged that
    /// once, with the error, and logs its return: a retry failing meanwhile says nothing new,
    /// and logs at DEBUG ([`warn_unless_unreachable`]).
    pub fn api_unreachable(&self) -> bool {
        self.unreachable
            .as_ref()
            .is_some_and(|unreachable| *unreachable.borrow())
    }

    /// Resolves at the next recovery, plus this waiter's share of [`RECOVERY_SPREAD`]; never
    /// when there is no notion of recovery (or its source is gone).
    pub async fn recovered(&mut self) {
        let changed = match self.recoveries.as_mut() {
            Some(receiver) => receiver.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(RECOVERY_SPREAD.mul_f64(rand::random::<f64>())).await;
    }

    /// Sleeps `wait`, cut short when the API server comes back meanwhile; true when it was.
    pub async fn sleep(&mut self, wait: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(wait) => false,
            () = self.recovered() => true,
        }
    }

    /// One `()` per recovery, for an actor to handle as a stream.
    pub fn stream(self) -> BoxStream<'static, ApiRecovered> {
        Box::pin(futures::stream::unfold(self, |mut recovery| async move {
            recovery.recovered().await;
            Some((ApiRecovered, recovery))
        }))
    }
}

/// `tracing::warn!`, or `tracing::debug!` while `$recovery` (an [`ApiRecovery`]) says the API
/// server is unreachable: one outage is one WARN, not one per failed retry.
macro_rules! warn_unless_unreachable {
    ($recovery:expr, $($event:tt)+) => {
        if $recovery.api_unreachable() {
            tracing::debug!($($event)+)
        } else {
            tracing::warn!($($event)+)
        }
    };
}
pub(crate) use warn_unless_unreachable;

/// The API server answers again after a run of failures: retry what waits now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, actix::Message)]
#[rtype(result = "()")]
pub struct ApiRecovered;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_retry_wait_ends_within_the_spread_after_a_recovery() {
        let (announce, recoveries) = watch::channel(0u64);
        let (_, unreachable) = watch::channel(true);
        let mut recovery = ApiRecovery::new(recoveries, unreachable);
        assert!(recovery.api_unreachable());
        let started = tokio::time::Instant::now();
        let waiting = tokio::spawn(async move { recovery.sleep(Duration::from_secs(30)).await });
        tokio::time::sleep(Duration::from_secs(2)).await;
        announce.send_modify(|count| *count += 1);
        assert!(
            waiting.await.expect("the wait ends"),
            "woken, not timed out"
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took <= Duration::from_secs(2) + RECOVERY_SPREAD,
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovery_before_subscribing_wakes_no_one() {
        let (announce, recoveries) = watch::channel(0u64);
        announce.send_modify(|count| *count += 1);
        let (_, unreachable) = watch::channel(false);
        let mut recovery = ApiRecovery::new(recoveries, unreachable);
        assert!(!recovery.api_unreachable());
        assert!(!recovery.clone().sleep(Duration::from_secs(1)).await);
        assert!(!recovery.sleep(Duration::from_secs(1)).await);
        assert!(!ApiRecovery::never().sleep(Duration::from_secs(1)).await);
    }
}
