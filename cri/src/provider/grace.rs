//! How long a pod's containers get to stop: the grace period left until its deletion deadline,
//! never under the kubelet's minimum. Pure: the time is an argument; `terminate`, `kill` and
//! the garbage collector act on it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::engine::Ending;

/// The kubelet never gives a container less than this to stop (`minimumGracePeriodInSeconds`).
pub const MIN_GRACE: Duration = Duration::from_secs(2);

/// `terminationGracePeriodSeconds`' API default.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace period left to the pod's containers at `now`: what remains until its
/// `deletionTimestamp` (within `deletionGracePeriodSeconds`), never under two seconds. An
/// eviction here is a hard one: the minimum.
pub fn grace_left(pod: &Pod, ending: &Ending, now: Timestamp) -> Duration {
    if matches!(ending, Ending::Evicted { .. }) {
        return MIN_GRACE;
    }
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    let full = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let left = pod
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|deadline| Duration::try_from(deadline.0.duration_since(now)).ok())
        .map_or(full, |left| left.min(full));
    left.max(MIN_GRACE)
}
