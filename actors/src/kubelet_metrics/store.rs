//! The kinds of metric the kubelet's families are, as component-base keeps them: counters,
//! gauges and histograms (cumulative buckets, sum, count), each by label values, safe to touch
//! from any thread. What is recorded is read back as a snapshot for the exposition; nothing
//! here writes text.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

/// A family's name (the kubelet's, whole), help text (with component-base's stability
/// prefix), type and label names.
#[derive(Debug, Clone, Copy)]
pub struct Desc {
    pub name: &'static str,
    pub help: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    pub labels: &'static [&'static str],
}

fn key(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

/// A counter or a gauge by label values.
#[derive(Debug)]
pub struct Values {
    pub desc: Desc,
    series: Mutex<BTreeMap<Vec<String>, f64>>,
}

impl Values {
    pub const fn new(desc: Desc) -> Self {
        Self {
            desc,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds `by` to the series of `labels` (given in the desc's order).
    pub fn add(&self, labels: &[&str], by: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        *series.entry(key(labels)).or_insert(0.0) += by;
    }

    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1.0);
    }

    pub fn set(&self, labels: &[&str], value: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series.insert(key(labels), value);
    }

    /// Every series, in label order.
    pub fn snapshot(&self) -> Vec<(Vec<String>, f64)> {
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// One histogram's observations: per-bucket counts (not yet cumulative), sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub buckets: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Observed {
    /// The cumulative count at each upper bound, as the exposition's `le` buckets hold.
    pub fn cumulative(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .scan(0, |total, count| {
                *total += count;
                Some(*total)
            })
            .collect()
    }
}

/// A histogram by label values, with fixed upper bounds (`+Inf` implied).
#[derive(Debug)]
pub struct Histograms {
    pub desc: Desc,
    pub bounds: &'static [f64],
    series: Mutex<BTreeMap<Vec<String>, Observed>>,
}

impl Histograms {
    pub const fn new(desc: Desc, bounds: &'static [f64]) -> Self {
        Self {
            desc,
            bounds,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn observe(&self, labels: &[&str], value: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let observed = series.entry(key(labels)).or_insert_with(|| Observed {
            buckets: vec![0; self.bounds.len()],
            ..Observed::default()
        });
        // An observation beyond every bound is only in `+Inf` (the count).
        if let Some(index) = self.bounds.iter().position(|bound| value <= *bound) {
            observed.buckets[index] += 1;
        }
        observed.sum += value;
        observed.count += 1;
    }

    /// Every series, in label order; a histogram without labels has its one series from the
    /// start, all zero, as a Go client's plain histogram does.
    pub fn snapshot(&self) -> Vec<(Vec<String>, Observed)> {
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        if series.is_empty() && self.desc.labels.is_empty() {
            let empty = Observed {
                buckets: vec![0; self.bounds.len()],
                ..Observed::default()
            };
            return vec![(Vec::new(), empty)];
        }
        series.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// Prometheus' `DefBuckets`.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    const DESC: Desc = Desc {
        name: "h",
        help: "h",
        kind: "histogram",
        labels: &["op"],
    };

    #[test]
    fn observations_fall_in_the_first_bucket_that_holds_them_and_add_up() {
        let histograms = Histograms::new(DESC, &[0.1, 1.0]);
        for value in [0.05, 0.1, 0.5, 7.0] {
            histograms.observe(&["list"], value);
        }
        let [(labels, observed)] = histograms.snapshot().try_into().expect("one series");
        assert_eq!(labels, ["list"]);
        assert_eq!(observed.cumulative(), [2, 3], "7 s is only in +Inf");
        assert_eq!((observed.count, observed.sum), (4, 7.65));
    }

    #[test]
    fn a_histogram_without_labels_is_served_before_its_first_observation() {
        let plain = Histograms::new(
            Desc {
                labels: &[],
                ..DESC
            },
            &[0.1, 1.0],
        );
        let [(labels, observed)] = plain.snapshot().try_into().expect("one series");
        assert!(labels.is_empty());
        assert_eq!((observed.cumulative(), observed.count), (vec![0, 0], 0));
        let labelled = Histograms::new(DESC, &[0.1, 1.0]);
        assert!(labelled.snapshot().is_empty(), "a vector has no series yet");
    }

    #[test]
    fn counters_add_by_label_values_and_gauges_are_set() {
        let values = Values::new(DESC);
        values.inc(&["a"]);
        values.add(&["a"], 2.0);
        values.set(&["b"], 9.0);
        assert_eq!(
            values.snapshot(),
            [(vec!["a".to_owned()], 3.0), (vec!["b".to_owned()], 9.0)]
        );
    }
}
