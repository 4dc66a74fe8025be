//! The pure parts of lease renewal: what a new Lease looks like, what a renewal writes, how
//! renewTime stays monotonic, and the kubelet's timings. No I/O, no clocks: time is an argument.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference},
    jiff::{SignedDuration, Timestamp},
};

use crate::ports::{LeaseRenewal, NODE_LEASE_NAMESPACE};

/// Back-to-back renewal attempts per round (`maxUpdateRetries`).
pub const MAX_UPDATE_ATTEMPTS: u32 = 5;
/// Jitter of the renewal loop: the wait is `interval × (1 + U[0, 0.04))`.
pub const RENEW_JITTER: f64 = 0.04;
const ENSURE_BACKOFF_START: Duration = Duration::from_millis(200);
const ENSURE_BACKOFF_CAP: Duration = Duration::from_secs(7);

/// How often to renew: a quarter of the lease duration (10 s for 40 s).
pub fn renew_interval(lease_duration_seconds: i32) -> Duration {
    Duration::from_secs_f64(f64::from(lease_duration_seconds.max(1)) * 0.25)
}

/// The wait before the next round, jittered only upwards; `unit_sample` ∈ [0, 1).
pub fn jittered(interval: Duration, unit_sample: f64) -> Duration {
    interval.mul_f64(1.0 + RENEW_JITTER * unit_sample.clamp(0.0, 1.0))
}

/// A random start phase in [0, interval): nodes started together (a fleet) spread their
/// renewals over the interval at once instead of drifting apart only by the jitter, 0.4 s per
/// round; `unit_sample` ∈ [0, 1).
pub fn start_phase(interval: Duration, unit_sample: f64) -> Duration {
    interval.mul_f64(unit_sample.clamp(0.0, 1.0))
}

/// `backoffEnsureLease`'s waits: 200 ms, 400 ms, … doubling, capped at 7 s.
pub fn ensure_backoff(failures: u32) -> Duration {
    crate::retry::doubling_backoff(ENSURE_BACKOFF_START, ENSURE_BACKOFF_CAP, failures)
}

/// A renewTime the node-lifecycle controller will count: the wall clock, truncated to the
/// microseconds MicroTime keeps, but always at least 1 µs after the previous renewTime, so a
/// clock step backwards never produces a renewal the controller ignores.
pub fn next_renew_time(previous: Option<Timestamp>, now: Timestamp) -> Timestamp {
    let now = truncate_to_micros(now);
    match previous.map(truncate_to_micros) {
        Some(previous) if now <= previous => previous
            .checked_add(SignedDuration::from_micros(1))
            .unwrap_or(previous),
        _ => now,
    }
}

fn truncate_to_micros(at: Timestamp) -> Timestamp {
    let micros = at.as_microsecond();
    Timestamp::from_microsecond(micros).unwrap_or(at)
}

/// The owner reference that ties the Lease to its Node.
pub fn node_owner(node: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: node.to_owned(),
        uid: uid.to_owned(),
        ..OwnerReference::default()
    }
}

/// The Lease the kubelet creates: holder = node name, the configured duration, renewTime now,
/// owned by the Node.
pub fn new_lease(
    node: &str,
    lease_duration_seconds: i32,
    renew_time: Timestamp,
    owner_uid: &str,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_owned()),
            namespace: Some(NODE_LEASE_NAMESPACE.to_owned()),
            owner_references: Some(vec![node_owner(node, owner_uid)]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_owned()),
            lease_duration_seconds: Some(lease_duration_seconds),
            renew_time: Some(MicroTime(renew_time)),
            ..LeaseSpec::default()
        }),
    }
}

/// The renewal of `base`: duration and renewTime re-asserted, the owner added if it is missing
/// and known. `None` when `base` has no resourceVersion to be optimistic about.
pub fn renewal_of(
    base: &Lease,
    lease_duration_seconds: i32,
    now: Timestamp,
    node_uid: Option<&str>,
) -> Option<LeaseRenewal> {
    let previous = base
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|time| time.0);
    let has_owner = base
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|owners| !owners.is_empty());
    Some(LeaseRenewal {
        name: base.metadata.name.clone()?,
        resource_version: base.metadata.resource_version.clone()?,
        lease_duration_seconds,
        renew_time: next_renew_time(previous, now),
        owner_node_uid: if has_owner {
            None
        } else {
            node_uid.map(str::to_owned)
        },
    })
}

/// Whether `lease` already names its Node as owner.
pub fn has_owner(lease: &Lease) -> bool {
    lease
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|owners| !owners.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn renew_interval_is_a_quarter_of_the_duration() {
        assert_eq!(renew_interval(40), Duration::from_secs(10));
        assert_eq!(
            jittered(Duration::from_secs(10), 0.0),
            Duration::from_secs(10)
        );
        assert_eq!(
            jittered(Duration::from_secs(10), 0.5),
            Duration::from_millis(10_200)
        );
    }

    #[test]
    fn the_start_phase_lies_within_one_interval() {
        let interval = Duration::from_secs(10);
        assert_eq!(start_phase(interval, 0.0), Duration::ZERO);
        assert_eq!(start_phase(interval, 0.25), Duration::from_millis(2500));
        assert!(start_phase(interval, 0.999_999) < interval);
        assert_eq!(start_phase(interval, 7.0), interval, "samples are clamped");
    }

    /// 1,000 nodes started in the same instant: with a random start phase and the jitter,
    /// their renewals fall evenly over the interval, in the first round and ten rounds on;
    /// without the phase every node renews within the first 4 % of the interval.
    #[test]
    fn renewals_of_nodes_started_together_spread_over_the_interval() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        let mut random = StdRng::seed_from_u64(8);
        let interval = Duration::from_secs(10);
        let busiest_second = |renewals: &[Duration]| {
            let mut per_second = [0_usize; 10];
            for renewal in renewals {
                let second = (renewal.as_secs_f64() % 10.0).floor();
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let bucket = (second as usize).min(9);
                per_second[bucket] += 1;
            }
            per_second.into_iter().max().unwrap_or(0)
        };
        let mut phased: Vec<Duration> = (0..1000)
            .map(|_| start_phase(interval, random.random()))
            .collect();
        assert!(
            busiest_second(&phased) < 150,
            "first round: about 100 per second"
        );
        for _ in 0..10 {
            for renewal in &mut phased {
                *renewal += jittered(interval, random.random());
            }
        }
        assert!(busiest_second(&phased) < 150, "ten rounds on: still even");

        let mut in_step = vec![Duration::ZERO; 1000];
        for renewal in &mut in_step {
            *renewal += jittered(interval, random.random());
        }
        assert_eq!(
            busiest_second(&in_step),
            1000,
            "without a phase the jitter alone keeps every renewal in one second"
        );
    }

    #[test]
    fn ensure_backoff_doubles_from_200ms_to_a_7s_cap() {
        let waits: Vec<u128> = (0..8)
            .map(|failures| ensure_backoff(failures).as_millis())
            .collect();
        assert_eq!(waits, vec![200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    }

    #[test]
    fn renew_time_never_goes_backwards() {
        let previous = at("2026-01-01T00:00:10.000005Z");
        assert_eq!(
            next_renew_time(Some(previous), at("2026-01-01T00:00:20Z")),
            at("2026-01-01T00:00:20Z")
        );
        assert_eq!(
            next_renew_time(Some(previous), at("2026-01-01T00:00:05Z")),
            at("2026-01-01T00:00:10.000006Z"),
            "a clock step backwards still moves renewTime forward by 1µs"
        );
        assert_eq!(
            next_renew_time(None, at("2026-01-01T00:00:05.123456789Z")),
            at("2026-01-01T00:00:05.123456Z")
        );
    }

    #[test]
    fn a_new_lease_is_held_by_and_owned_by_its_node() {
        let lease = new_lease("worker-1", 40, at("2026-01-01T00:00:00Z"), "uid-1");
        let spec = lease.spec.as_ref().expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("worker-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(lease.metadata.namespace.as_deref(), Some("kube-node-lease"));
        let owner = &lease.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Node", "worker-1", "uid-1")
        );
    }

    #[test]
    fn a_renewal_adds_the_owner_only_when_missing() {
        let mut base = new_lease("worker-1", 40, at("2026-01-01T00:00:00Z"), "uid-1");
        base.metadata.resource_version = Some("7".to_owned());
        let renewal =
            renewal_of(&base, 40, at("2026-01-01T00:00:10Z"), Some("uid-1")).expect("renewable");
        assert_eq!(
            (renewal.resource_version.as_str(), renewal.owner_node_uid),
            ("7", None)
        );
        base.metadata.owner_references = None;
        let renewal =
            renewal_of(&base, 40, at("2026-01-01T00:00:10Z"), Some("uid-1")).expect("renewable");
        assert_eq!(renewal.owner_node_uid.as_deref(), Some("uid-1"));
        base.metadata.resource_version = None;
        assert!(renewal_of(&base, 40, at("2026-01-01T00:00:10Z"), None).is_none());
    }
}
