//! Table tests of the pure eviction core: threshold parsing with the kubelet's errors, and the
//! housekeeping pass's state machine with `now` as an argument.

use std::{collections::BTreeMap, time::Duration};

use tokio::time::Instant;

use super::{
    pressure::{PressureState, housekeeping_pass},
    signals::{Condition, Observation, Observations, Signal},
    thresholds::{ThresholdConfig, ThresholdValue, default_eviction_hard, parse_thresholds},
};

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

fn graces(entries: &[(&str, u64)]) -> BTreeMap<String, Duration> {
    entries
        .iter()
        .map(|(key, seconds)| ((*key).to_owned(), Duration::from_secs(*seconds)))
        .collect()
}

#[test]
fn the_default_hard_thresholds_parse_and_allocatable_memory_follows_memory() {
    let hard = default_eviction_hard();
    let empty = BTreeMap::new();
    let config = ThresholdConfig {
        hard: &hard,
        soft: &empty,
        soft_grace_period: &BTreeMap::new(),
        minimum_reclaim: &empty,
    };
    let thresholds = parse_thresholds(&config, true).expect("defaults are valid");
    let signals: Vec<_> = thresholds
        .iter()
        .map(|threshold| threshold.signal)
        .collect();
    assert!(signals.contains(&Signal::AllocatableMemoryAvailable));
    assert_eq!(thresholds.len(), 5);
    let memory = thresholds
        .iter()
        .find(|threshold| threshold.signal == Signal::MemoryAvailable)
        .expect("memory.available");
    assert_eq!(memory.value, ThresholdValue::Quantity(100 * 1024 * 1024));
    assert!(memory.hard && memory.grace_period.is_zero());
}

/// (evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim, error).
type RejectionCase = (
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, u64)],
    &'static [(&'static str, &'static str)],
    &'static str,
);

/// (seconds, available, memory pressure, met, eligible).
type PassStep<'a> = (u64, u64, bool, &'a [usize], &'a [usize]);

#[test]
fn invalid_thresholds_are_refused_with_the_kubelets_reasons() {
    let cases: &[RejectionCase] = &[
        (
            &[("memory.free", "1Gi")],
            &[],
            &[],
            &[],
            "unsupported eviction signal memory.free",
        ),
        (
            &[],
            &[],
            &[("memory.free", 30)],
            &[],
            "unsupported eviction signal memory.free",
        ),
        (
            &[("nodefs.available", "110%")],
            &[],
            &[],
            &[],
            "must be <= 100%",
        ),
        (
            &[("nodefs.available", "-1%")],
            &[],
            &[],
            &[],
            "must be >= 0%",
        ),
        (
            &[("memory.available", "0")],
            &[],
            &[],
            &[],
            "must be positive",
        ),
        (
            &[("memory.available", "lots")],
            &[],
            &[],
            &[],
            "invalid quantity",
        ),
        (
            &[],
            &[("memory.available", "1Gi")],
            &[],
            &[],
            "no grace period specified for soft eviction threshold memory.available",
        ),
        (
            &[],
            &[],
            &[],
            &[("memory.available", "0%")],
            "minimum reclaim memory.available must be positive",
        ),
        (
            &[],
            &[],
            &[],
            &[("memory.available", "-1Mi")],
            "negative eviction minimum reclaim",
        ),
        (
            &[],
            &[],
            &[],
            &[("disk.available", "1Gi")],
            "unsupported eviction signal disk.available",
        ),
    ];
    for (hard, soft, grace, reclaim, expected) in cases {
        let (hard, soft, grace, reclaim) = (map(hard), map(soft), graces(grace), map(reclaim));
        let config = ThresholdConfig {
            hard: &hard,
            soft: &soft,
            soft_grace_period: &grace,
            minimum_reclaim: &reclaim,
        };
        let error = parse_thresholds(&config, false).expect_err(expected);
        assert!(
            error.to_string().contains(expected),
            "expected {expected:?} in {error}"
        );
    }
}

#[test]
fn what_the_kubelet_accepts_is_accepted() {
    // An explicit allocatableMemory.available, and a grace period with no soft threshold.
    let hard = map(&[("allocatableMemory.available", "1Gi")]);
    let grace = graces(&[("memory.available", 30)]);
    let empty = BTreeMap::new();
    let config = ThresholdConfig {
        hard: &hard,
        soft: &empty,
        soft_grace_period: &grace,
        minimum_reclaim: &empty,
    };
    let thresholds = parse_thresholds(&config, true).expect("valid for the kubelet");
    assert_eq!(thresholds.len(), 1);
    assert_eq!(thresholds[0].signal, Signal::AllocatableMemoryAvailable);
}

#[test]
fn zero_and_hundred_percent_are_dropped_silently() {
    let hard = map(&[("nodefs.available", "0%"), ("imagefs.available", "100%")]);
    let empty = BTreeMap::new();
    let config = ThresholdConfig {
        hard: &hard,
        soft: &empty,
        soft_grace_period: &BTreeMap::new(),
        minimum_reclaim: &empty,
    };
    assert_eq!(parse_thresholds(&config, false), Ok(Vec::new()));
}

fn observed(signal: Signal, available: u64, capacity: u64) -> Observations {
    [(
        signal,
        Observation {
            available,
            capacity,
        },
    )]
    .into_iter()
    .collect()
}

/// memory.available < 100 hard, < 200 soft with 30 s grace; min reclaim 50; 5 min transition.
#[test]
fn conditions_turn_on_at_once_and_off_only_after_the_transition_period() {
    let hard = map(&[("memory.available", "100")]);
    let soft = map(&[("memory.available", "200")]);
    let grace = graces(&[("memory.available", 30)]);
    let reclaim = map(&[("memory.available", "50")]);
    let config = ThresholdConfig {
        hard: &hard,
        soft: &soft,
        soft_grace_period: &grace,
        minimum_reclaim: &reclaim,
    };
    let thresholds = parse_thresholds(&config, false).expect("valid");
    const HARD: usize = 0;
    const SOFT: usize = 1;
    let transition = Duration::from_secs(300);
    let start = Instant::now();
    let at = |seconds: u64| start + Duration::from_secs(seconds);
    // (seconds, available, memory pressure, met, eligible)
    let steps: &[PassStep] = &[
        (0, 1000, false, &[], &[]),
        (10, 150, true, &[SOFT], &[]), // soft met: condition at once, grace running
        (40, 150, true, &[SOFT], &[SOFT]), // 30 s later: eligible for eviction
        (50, 90, true, &[HARD, SOFT], &[HARD, SOFT]),
        (60, 120, true, &[HARD, SOFT], &[HARD, SOFT]), // 120 < 100 + 50: not resolved
        (70, 160, true, &[SOFT], &[SOFT]),             // hard resolved (160 ≥ 150); soft still met
        (80, 400, true, &[], &[]),                     // recovered; the condition is held
        (70 + 299, 400, true, &[], &[]),               // still inside the transition period
        (70 + 300, 400, false, &[], &[]),              // transition period over
    ];
    let mut state = PressureState::default();
    for (seconds, available, pressure, met, eligible) in steps {
        let outcome = housekeeping_pass(
            &thresholds,
            &observed(Signal::MemoryAvailable, *available, 10_000),
            &mut state,
            transition,
            at(*seconds),
        );
        assert_eq!(
            outcome.has(Condition::MemoryPressure),
            *pressure,
            "at {seconds}s"
        );
        assert_eq!(
            outcome.met.iter().copied().collect::<Vec<_>>(),
            *met,
            "met at {seconds}s"
        );
        assert_eq!(
            outcome.eligible.iter().copied().collect::<Vec<_>>(),
            *eligible,
            "eligible at {seconds}s"
        );
    }
}

#[test]
fn percentage_thresholds_are_taken_of_capacity() {
    let hard = map(&[("nodefs.available", "10%"), ("pid.available", "5%")]);
    let empty = BTreeMap::new();
    let config = ThresholdConfig {
        hard: &hard,
        soft: &empty,
        soft_grace_period: &BTreeMap::new(),
        minimum_reclaim: &empty,
    };
    let thresholds = parse_thresholds(&config, false).expect("valid");
    // (signal, available, capacity, condition expected)
    let cases = [
        (
            Signal::NodefsAvailable,
            99,
            1000,
            Some(Condition::DiskPressure),
        ),
        (Signal::NodefsAvailable, 100, 1000, None),
        (Signal::PidAvailable, 49, 1000, Some(Condition::PidPressure)),
        (Signal::PidAvailable, 50, 1000, None),
        (Signal::MemoryAvailable, 0, 1000, None), // no threshold on memory here
    ];
    for (signal, available, capacity, expected) in cases {
        let outcome = housekeeping_pass(
            &thresholds,
            &observed(signal, available, capacity),
            &mut PressureState::default(),
            Duration::from_secs(300),
            Instant::now(),
        );
        assert_eq!(
            outcome.conditions.iter().next().copied(),
            expected,
            "{signal} {available}/{capacity}"
        );
    }
}
