//! The backoff between a watch's reconnects, cut short when the API server is back. kube's
//! `watcher` resumes from its last resourceVersion after an error (and relists on `410 Gone`)
//! the next time it is polled; its own `default_backoff` sleeps up to 30 s in between and
//! cannot be woken, so a watch could stay down long after the server answers again. This
//! waits the same growing, jittered time, or until [`ApiRecovery`] fires, whichever is first.

use std::time::Duration;

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::runtime::watcher;
use nodepulse_actors::ports::ApiRecovery;

/// The first wait after a watch error (kube's default backoff starts here too).
const FIRST_WAIT: Duration = Duration::from_millis(800);
/// The longest wait between reconnects while the server stays away (kube's default cap).
const LONGEST_WAIT: Duration = Duration::from_secs(30);

/// The wait after `failures` consecutive errors: doubling from [`FIRST_WAIT`] up to
/// [`LONGEST_WAIT`], then jittered down by up to half (`unit_sample` ∈ [0, 1)), so many
/// watches that failed together do not reconnect together.
pub fn reconnect_wait(failures: u32, unit_sample: f64) -> Duration {
    let doubled = FIRST_WAIT
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(LONGEST_WAIT);
    doubled.mul_f64(1.0 - 0.5 * unit_sample.clamp(0.0, 1.0))
}

struct Resuming<S> {
    watch: std::pin::Pin<Box<S>>,
    recovery: ApiRecovery,
    failures: u32,
}

/// `watch` (a raw `watcher` stream, without backoff) with a wakeable backoff after each error.
pub fn resuming<K, S>(watch: S, recovery: ApiRecovery) -> BoxStream<'static, S::Item>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let state = Resuming {
        watch: Box::pin(watch),
        recovery,
        failures: 0,
    };
    futures::stream::unfold(state, |mut state| async move {
        if state.failures > 0 {
            let wait = reconnect_wait(state.failures, rand::random::<f64>());
            if state.recovery.sleep(wait).await {
                tracing::debug!("the API server is back; resuming the watch now");
                state.failures = 0;
            }
        }
        let item = state.watch.next().await?;
        state.failures = match &item {
            Ok(_) => 0,
            Err(_) => state.failures.saturating_add(1),
        };
        Some((item, state))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_waits_double_up_to_the_cap_and_jitter_downwards() {
        let waits: Vec<Duration> = (1..=7)
            .map(|failures| reconnect_wait(failures, 0.0))
            .collect();
        assert_eq!(
            waits,
            [800, 1600, 3200, 6400, 12_800, 25_600, 30_000].map(Duration::from_millis)
        );
        assert_eq!(reconnect_wait(40, 0.0), LONGEST_WAIT);
        assert_eq!(reconnect_wait(1, 0.999_999).as_millis(), 400);
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovery_cuts_the_wait_before_the_next_reconnect() {
        let (announce, recoveries) = tokio::sync::watch::channel(0u64);
        let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = std::sync::Arc::clone(&attempts);
        let failing = futures::stream::repeat_with(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err::<watcher::Event<()>, _>(watcher::Error::NoResourceVersion)
        });
        let (_, unreachable) = tokio::sync::watch::channel(true);
        let mut watch = resuming(failing, ApiRecovery::new(recoveries, unreachable));
        let started = tokio::time::Instant::now();
        for _ in 0..6 {
            assert!(watch.next().await.expect("an item").is_err());
        }
        let backed_off = started.elapsed();
        assert!(backed_off >= Duration::from_secs(12), "{backed_off:?}");
        let next = tokio::spawn(async move { watch.next().await.map(|item| item.is_err()) });
        tokio::time::sleep(Duration::from_secs(1)).await;
        announce.send_modify(|count| *count += 1);
        assert_eq!(next.await.expect("the watch goes on"), Some(true));
        let woken_after = started.elapsed() - backed_off;
        assert!(
            woken_after <= Duration::from_secs(1) + nodepulse_actors::ports::RECOVERY_SPREAD,
            "{woken_after:?}: the wait was up to 30 s"
        );
        assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 7);
    }
}
