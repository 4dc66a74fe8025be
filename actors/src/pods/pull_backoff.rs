//! The kubelet's image pull back-off: client-go's `flowcontrol.Backoff` as the kubelet sets it up
//! for images (10 s initial, doubling, 300 s cap, no jitter), keyed by pod UID and image, with
//! the last pull error kept for the `ImagePullBackOff` waiting message. Time is an argument.

use std::{collections::BTreeMap, time::Duration};

/// The kubelet's image back-off (client-go `flowcontrol.Backoff`, 10 s initial, 300 s cap, no
/// jitter), per pod UID and image, with the last error for the waiting message.
#[derive(Debug, Clone, Default)]
pub struct PullBackoff {
    entries: BTreeMap<(String, String), BackoffEntry>,
}

#[derive(Debug, Clone)]
struct BackoffEntry {
    delay: Duration,
    last_update: tokio::time::Instant,
    last_error: String,
}

impl PullBackoff {
    pub const INITIAL: Duration = Duration::from_secs(10);
    pub const MAX: Duration = Duration::from_secs(300);

    /// When the next pull may be tried, while a back-off runs.
    pub fn retry_at(
        &self,
        pod_uid: &str,
        image: &str,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let entry = self.live(pod_uid, image, now)?;
        let until = entry.last_update + entry.delay;
        (now < until).then_some(until)
    }

    /// `Back-off pulling image "x": ErrImagePull: <error>` while in back-off.
    pub(super) fn waiting_message(
        &self,
        pod_uid: &str,
        image: &str,
        now: tokio::time::Instant,
    ) -> Option<String> {
        self.retry_at(pod_uid, image, now)?;
        let entry = self.live(pod_uid, image, now)?;
        Some(format!(
            "Back-off pulling image {image:?}: {}",
            entry.last_error
        ))
    }

    /// An entry idle for more than twice the cap has expired: the next failure starts over.
    fn live(&self, pod_uid: &str, image: &str, now: tokio::time::Instant) -> Option<&BackoffEntry> {
        let entry = self.entries.get(&(pod_uid.to_owned(), image.to_owned()))?;
        (now.saturating_duration_since(entry.last_update) <= Self::MAX * 2).then_some(entry)
    }

    pub(super) fn record_failure(
        &mut self,
        pod_uid: &str,
        image: &str,
        error: String,
        now: tokio::time::Instant,
    ) {
        let delay = match self.live(pod_uid, image, now) {
            Some(entry) => (entry.delay * 2).min(Self::MAX),
            None => Self::INITIAL,
        };
        let entry = BackoffEntry {
            delay,
            last_update: now,
            last_error: error,
        };
        self.entries
            .insert((pod_uid.to_owned(), image.to_owned()), entry);
    }

    /// `Backoff.GC`: entries not updated for twice the cap go.
    pub fn forget_stale(&mut self, now: tokio::time::Instant) {
        self.entries
            .retain(|_, entry| now.saturating_duration_since(entry.last_update) <= Self::MAX * 2);
    }
}
