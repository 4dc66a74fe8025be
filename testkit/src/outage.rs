//! What the outage tests share: the outage's length, the Leases' renew times, and what the
//! emulator served once it was back.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::ListParams};
use nodepulse_emulator::{RequestRecord, Verb};

use crate::PATIENCE;

/// `NODEPULSE_OUTAGE_SECONDS`, 20 by default (the case is 60).
pub fn outage_length() -> Duration {
    let seconds = std::env::var("NODEPULSE_OUTAGE_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(seconds)
}

/// The renewTime of every Lease, by name.
pub async fn renew_times(client: &kube::Client) -> Vec<(String, SystemTime)> {
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    let Ok(listed) = leases.list(&ListParams::default()).await else {
        return Vec::new();
    };
    listed
        .items
        .into_iter()
        .filter_map(|lease| {
            let renewed = lease.spec?.renew_time?.0;
            Some((lease.metadata.name?, SystemTime::from(renewed)))
        })
        .collect()
}

/// Polls `condition` every `every` until it holds, failing the test with `what` after
/// `patience`. (Slower than `eventually`: a list of 1,000 Leases every 5 ms would load the
/// server whose requests the test counts.)
pub async fn poll_until<F, Fut>(what: &str, patience: Duration, every: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {patience:?} waiting until {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Waits until every Lease in `names` was renewed after `since`; how long after `back` that was.
pub async fn leases_renewed(
    client: &kube::Client,
    names: &[String],
    since: SystemTime,
    back: Instant,
) -> Duration {
    let every = Duration::from_millis(if names.len() > 1 { 200 } else { 20 });
    poll_until(
        "every Lease is renewed after the outage",
        PATIENCE,
        every,
        || async {
            let renewed = renew_times(client).await;
            names.iter().all(|name| {
                renewed
                    .iter()
                    .any(|(lease, at)| lease == name && *at > since)
            })
        },
    )
    .await;
    back.elapsed()
}

/// How long after `back` the emulator served the first watch of `resource` again.
pub fn watch_resumed(
    requests: &[RequestRecord],
    resource: &str,
    back: Instant,
) -> Option<Duration> {
    requests
        .iter()
        .filter(|request| {
            request.verb == Verb::Watch && request.resource == resource && request.code == 200
        })
        .filter_map(|request| request.received.checked_duration_since(back))
        .min()
}
