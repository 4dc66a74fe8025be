//! Eviction thresholds from the configuration (`evictionHard`, `evictionSoft`,
//! `evictionSoftGracePeriod`, `evictionMinimumReclaim`), parsed and validated as the kubelet's
//! `ParseThresholdConfig` does, with its error texts. Pure: no I/O, no clock.

use std::{collections::BTreeMap, time::Duration};

use super::signals::{Observation, Signal};
use crate::quantity::parse_quantity;

/// A threshold's amount: absolute (bytes, inodes, PIDs) or a percentage of capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(u64),
    Percentage(f64),
}

impl ThresholdValue {
    /// The amount this value stands for against `capacity`.
    pub fn amount(self, capacity: u64) -> u64 {
        match self {
            Self::Quantity(quantity) => quantity,
            // Rounded as the kubelet's int64(float64(capacity) * percentage).
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            Self::Percentage(percent) => (capacity as f64 * percent / 100.0) as u64,
        }
    }
}

/// One threshold: the signal, the operator "less than" (the only one), the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    /// As configured (`100Mi`, `10%`), for messages and the debug view.
    pub text: String,
    /// Zero for hard thresholds.
    pub grace_period: Duration,
    pub hard: bool,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// Met when the available amount is below the threshold, raised by `extra` (the minimum
    /// reclaim while a met threshold has not been resolved yet).
    pub fn is_met(&self, observation: Observation, with_min_reclaim: bool) -> bool {
        let mut limit = self.value.amount(observation.capacity);
        if with_min_reclaim && let Some(reclaim) = self.min_reclaim {
            limit = limit.saturating_add(reclaim.amount(observation.capacity));
        }
        observation.available < limit
    }
}

/// Why the threshold configuration was refused: the setting, the signal and the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}.{signal}: {reason}")]
pub struct ThresholdError {
    /// `evictionHard`, `evictionSoft`, `evictionSoftGracePeriod` or `evictionMinimumReclaim`.
    pub setting: &'static str,
    /// The signal as written (it may be an unknown one).
    pub signal: String,
    pub value: String,
    pub reason: String,
}

/// The thresholds as written in the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdConfig<'a> {
    pub hard: &'a BTreeMap<String, String>,
    pub soft: &'a BTreeMap<String, String>,
    pub soft_grace_period: &'a BTreeMap<String, Duration>,
    pub minimum_reclaim: &'a BTreeMap<String, String>,
}

/// The kubelet's Linux `evictionHard` defaults.
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    [
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    ]
    .into_iter()
    .map(|(signal, value)| (signal.to_owned(), value.to_owned()))
    .collect()
}

/// Parses and validates all thresholds. `enforce_pods_allocatable` clones every hard
/// `memory.available` threshold for `allocatableMemory.available`, as the kubelet does when
/// `enforceNodeAllocatable` contains `pods`.
pub fn parse_thresholds(
    config: &ThresholdConfig<'_>,
    enforce_pods_allocatable: bool,
) -> Result<Vec<Threshold>, ThresholdError> {
    let mut min_reclaims = BTreeMap::new();
    for (name, text) in config.minimum_reclaim {
        let signal = known_signal("evictionMinimumReclaim", name, text)?;
        min_reclaims.insert(signal, parse_min_reclaim(name, text)?);
    }
    for (name, grace) in config.soft_grace_period {
        // Only the signal is checked: a grace period without a soft threshold is ignored, as
        // by the kubelet.
        known_signal("evictionSoftGracePeriod", name, &format!("{grace:?}"))?;
    }
    let mut thresholds = Vec::new();
    for (setting, map, hard) in [
        ("evictionHard", config.hard, true),
        ("evictionSoft", config.soft, false),
    ] {
        for (name, text) in map {
            let signal = known_signal(setting, name, text)?;
            let Some(value) = parse_value(setting, name, text)? else {
                continue; // "0%" and "100%" are dropped silently, as the kubelet does.
            };
            let grace_period = if hard {
                Duration::ZERO
            } else {
                *config
                    .soft_grace_period
                    .get(name)
                    .ok_or_else(|| ThresholdError {
                        setting: "evictionSoftGracePeriod",
                        signal: name.clone(),
                        value: text.clone(),
                        reason: format!(
                            "no grace period specified for soft eviction threshold {name}"
                        ),
                    })?
            };
            let threshold = Threshold {
                signal,
                value,
                text: text.clone(),
                grace_period,
                hard,
                min_reclaim: min_reclaims.get(&signal).copied(),
            };
            if hard && enforce_pods_allocatable && signal == Signal::MemoryAvailable {
                thresholds.push(Threshold {
                    signal: Signal::AllocatableMemoryAvailable,
                    ..threshold.clone()
                });
            }
            thresholds.push(threshold);
        }
    }
    Ok(thresholds)
}

fn known_signal(setting: &'static str, name: &str, value: &str) -> Result<Signal, ThresholdError> {
    match Signal::from_name(name) {
        None => Err(ThresholdError {
            setting,
            signal: name.to_owned(),
            value: value.to_owned(),
            reason: format!("unsupported eviction signal {name}"),
        }),
        Some(signal) => Ok(signal),
    }
}

/// A threshold value; `None` for the silently dropped `0%` and `100%`.
fn parse_value(
    setting: &'static str,
    name: &str,
    text: &str,
) -> Result<Option<ThresholdValue>, ThresholdError> {
    let error = |reason: String| ThresholdError {
        setting,
        signal: name.to_owned(),
        value: text.to_owned(),
        reason,
    };
    if let Some(percent) = text.trim().strip_suffix('%') {
        let value: f64 = percent.trim().parse().map_err(|_| {
            error(format!(
                "invalid percentage {text:?} for eviction signal {name}"
            ))
        })?;
        if !(0.0..=100.0).contains(&value) {
            let bound = if value < 0.0 { ">= 0%" } else { "<= 100%" };
            return Err(error(format!(
                "eviction percentage threshold {name} must be {bound}: {text}"
            )));
        }
        if value == 0.0 || value == 100.0 {
            return Ok(None);
        }
        return Ok(Some(ThresholdValue::Percentage(value)));
    }
    let quantity = parse_quantity(text).map_err(|quantity| error(quantity.to_string()))?;
    if quantity <= 0.0 {
        return Err(error(format!(
            "eviction threshold {name} must be positive: {text}"
        )));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Some(ThresholdValue::Quantity(quantity.ceil() as u64)))
}

fn parse_min_reclaim(name: &str, text: &str) -> Result<ThresholdValue, ThresholdError> {
    let error = |reason: String| ThresholdError {
        setting: "evictionMinimumReclaim",
        signal: name.to_owned(),
        value: text.to_owned(),
        reason,
    };
    if let Some(percent) = text.trim().strip_suffix('%') {
        let value: f64 = percent.trim().parse().map_err(|_| {
            error(format!(
                "invalid percentage {text:?} for eviction signal {name}"
            ))
        })?;
        if !(value > 0.0 && value <= 100.0) {
            return Err(error(format!(
                "eviction percentage minimum reclaim {name} must be positive: {text}"
            )));
        }
        return Ok(ThresholdValue::Percentage(value));
    }
    let quantity = parse_quantity(text).map_err(|quantity| error(quantity.to_string()))?;
    if quantity < 0.0 {
        return Err(error(format!(
            "negative eviction minimum reclaim specified for {name}"
        )));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(ThresholdValue::Quantity(quantity.ceil() as u64))
}
