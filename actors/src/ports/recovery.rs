//! "The API server is back": the one signal every waiting retry listens to. The API adapter
//! sees every request's outcome and announces the first success after a run of failures; a
//! retry wait ([`ApiRecovery::sleep`]) or an actor's stream ([`ApiRecovery::stream`]) ends then,
//! each after its own short random delay so that thousands of waiters do not all fire at once.

use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::watch;

/// Every waiter resumes within this long after the API server answers again, at a random
/// point of it: a fleet's retries are spread over this window instead of landing together.
pub const RECOVERY_SPREAD: Duration = Duration::from_millis(400);

/// A subscription to the API server coming back. Cheap to clone; a clone waits for the next
/// recovery, not for one already past.
#[derive(Debug)]
pub struct ApiRecovery {
    recoveries: Option<watch::Receiver<u64>>,
}

impl Clone for ApiRecovery {
    fn clone(&self) -> Self {
        let mut recoveries = self.recoveries.clone();
        if let Some(receiver) = recoveries.as_mut() {
            receiver.mark_unchanged();
        }
        Self { recoveries }
    }
}

impl ApiRecovery {
    /// Listens to `recoveries`, a counter bumped at every recovery; counts from now on.
    pub fn new(mut recoveries: watch::Receiver<u64>) -> Self {
        recoveries.mark_unchanged();
        Self {
            recoveries: Some(recoveries),
        }
    }

    /// A subscription that never fires (a port with no notion of reachability: test fakes).
    pub fn never() -> Self {
        Self { recoveries: None }
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
        let mut recovery = ApiRecovery::new(recoveries);
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
        let mut recovery = ApiRecovery::new(recoveries);
        assert!(!recovery.clone().sleep(Duration::from_secs(1)).await);
        assert!(!recovery.sleep(Duration::from_secs(1)).await);
        assert!(!ApiRecovery::never().sleep(Duration::from_secs(1)).await);
    }
}
