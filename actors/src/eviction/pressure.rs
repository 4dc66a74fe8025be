//! One housekeeping pass as a pure step: which thresholds are met, since when, which pressure
//! conditions to report after `evictionPressureTransitionPeriod`, and which thresholds have
//! outlasted their grace period. Time is an argument; the state is the caller's to keep.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use tokio::time::Instant;

use super::{
    signals::{Condition, Observations},
    thresholds::Threshold,
};

/// What one pass remembers for the next: kept by the actor across its own restarts, so a
/// restart neither drops a condition early nor restarts a grace period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PressureState {
    /// When each threshold (by index) was first seen met, while continuously met.
    pub first_observed: BTreeMap<usize, Instant>,
    /// When each condition was last observed.
    pub last_observed: BTreeMap<Condition, Instant>,
    /// The thresholds met in the previous pass, judged with their minimum reclaim.
    pub met: BTreeSet<usize>,
}

/// The outcome of a pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PassOutcome {
    /// Thresholds met now (by index), ignoring grace periods.
    pub met: BTreeSet<usize>,
    /// Conditions to report: observed within the transition period.
    pub conditions: BTreeSet<Condition>,
    /// Met thresholds whose grace period is over: the ones that would drive an eviction.
    pub eligible: BTreeSet<usize>,
}

impl PassOutcome {
    pub fn has(&self, condition: Condition) -> bool {
        self.conditions.contains(&condition)
    }
}

/// Runs one pass (the kubelet's `synchronize`, steps 4–7) at `now`.
pub fn housekeeping_pass(
    thresholds: &[Threshold],
    observations: &Observations,
    state: &mut PressureState,
    transition_period: Duration,
    now: Instant,
) -> PassOutcome {
    // Met now, plus those met last time that have not yet recovered by their minimum reclaim.
    let met: BTreeSet<usize> = thresholds
        .iter()
        .enumerate()
        .filter(|(index, threshold)| {
            observations
                .get(&threshold.signal)
                .is_some_and(|observation| {
                    threshold.is_met(*observation, false)
                        || (state.met.contains(index) && threshold.is_met(*observation, true))
                })
        })
        .map(|(index, _)| index)
        .collect();

    state.first_observed.retain(|index, _| met.contains(index));
    for index in &met {
        state.first_observed.entry(*index).or_insert(now);
    }

    // Soft thresholds count for conditions at once, before their grace period (as upstream).
    for index in &met {
        state
            .last_observed
            .insert(thresholds[*index].signal.condition(), now);
    }
    let conditions = state
        .last_observed
        .iter()
        .filter(|(_, last)| now.saturating_duration_since(**last) < transition_period)
        .map(|(condition, _)| *condition)
        .collect();

    let eligible = met
        .iter()
        .copied()
        .filter(|index| {
            state.first_observed.get(index).is_some_and(|first| {
                now.saturating_duration_since(*first) >= thresholds[*index].grace_period
            })
        })
        .collect();

    state.met.clone_from(&met);
    PassOutcome {
        met,
        conditions,
        eligible,
    }
}
