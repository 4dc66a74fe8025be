//! Per-actor mailbox counters: handled messages (total and per type), the last message,
//! the high-water mark and the time spent in handlers.
//!
//! Written on every message, so every write is a relaxed atomic: no lock is taken on the hot
//! path. Per-type counters live in a small fixed table whose slots are claimed once per type.

use std::{
    collections::BTreeMap,
    sync::{
        LazyLock, OnceLock,
        atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed},
    },
    time::{Duration, SystemTime},
};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Message types counted separately per actor; more types than this share an `other` counter.
const TYPE_SLOTS: usize = 16;

/// A fixed point in both clocks, so monotonic instants can be shown as wall-clock times.
static EPOCH: LazyLock<(Instant, SystemTime)> =
    LazyLock::new(|| (Instant::now(), SystemTime::now()));

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(EPOCH.0).as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Default)]
struct TypeCounter {
    name: OnceLock<&'static str>,
    count: AtomicU64,
}

/// The counters of one actor's mailbox. Shared by every instance the actor ever had.
///
/// Only the receiving side writes here, so senders never contend with the actor's thread
/// for these cache lines; the total handled is the sum of the per-type counters.
pub struct MailboxStats {
    capacity: usize,
    high_water: AtomicUsize,
    handling_nanos: AtomicU64,
    /// Slot index + 1 of the last handled type; 0 before the first message, `TYPE_SLOTS + 1`
    /// for a type that found no slot.
    last_type: AtomicUsize,
    last_at_nanos: AtomicU64,
    by_type: [TypeCounter; TYPE_SLOTS],
    other: AtomicU64,
}

impl MailboxStats {
    pub(crate) fn new(capacity: usize) -> Self {
        LazyLock::force(&EPOCH);
        Self {
            capacity,
            high_water: AtomicUsize::new(0),
            handling_nanos: AtomicU64::new(0),
            last_type: AtomicUsize::new(0),
            last_at_nanos: AtomicU64::new(0),
            by_type: Default::default(),
            other: AtomicU64::new(0),
        }
    }

    /// Notes the queue depth seen just before a message is taken. Only taking a message
    /// shrinks the queue, so the deepest it ever got is always seen here (or, while nothing
    /// takes messages, in the current depth that snapshots include).
    pub(crate) fn observe_depth(&self, depth: usize) {
        // A plain load first: the mark rarely moves, and a read keeps the cache line shared.
        if depth > self.high_water.load(Relaxed) {
            self.high_water.fetch_max(depth, Relaxed);
        }
    }

    /// Records one handled message of type `type_name` that took `started..finished`.
    pub(crate) fn record(&self, type_name: &'static str, started: Instant, finished: Instant) {
        let spent = u64::try_from(finished.saturating_duration_since(started).as_nanos());
        self.handling_nanos
            .fetch_add(spent.unwrap_or(u64::MAX), Relaxed);
        self.last_at_nanos
            .store(nanos_since_epoch(finished), Relaxed);
        let slot = self.slot_for(type_name);
        match slot {
            Some(index) => {
                self.by_type[index].count.fetch_add(1, Relaxed);
                self.last_type.store(index + 1, Relaxed);
            }
            None => {
                self.other.fetch_add(1, Relaxed);
                self.last_type.store(TYPE_SLOTS + 1, Relaxed);
            }
        }
    }

    fn slot_for(&self, type_name: &'static str) -> Option<usize> {
        for (index, counter) in self.by_type.iter().enumerate() {
            let name = counter.name.get_or_init(|| type_name);
            if std::ptr::eq(*name, type_name) || *name == type_name {
                return Some(index);
            }
        }
        None
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn handled(&self) -> u64 {
        let typed: u64 = self
            .by_type
            .iter()
            .map(|counter| counter.count.load(Relaxed))
            .sum();
        typed + self.other.load(Relaxed)
    }

    /// A consistent-enough copy for the debug endpoint and metrics (each counter is exact;
    /// counters are not read at one instant).
    pub fn snapshot(&self, depth: usize) -> MailboxSnapshot {
        let mut handled_by_type = BTreeMap::new();
        for counter in &self.by_type {
            if let Some(name) = counter.name.get() {
                handled_by_type.insert(short_type_name(name), counter.count.load(Relaxed));
            }
        }
        let other = self.other.load(Relaxed);
        if other > 0 {
            handled_by_type.insert("other".to_owned(), other);
        }
        let last_message = match self.last_type.load(Relaxed) {
            0 => None,
            index => {
                let name = self
                    .by_type
                    .get(index - 1)
                    .and_then(|counter| counter.name.get())
                    .map_or_else(|| "other".to_owned(), |name| short_type_name(name));
                let at = EPOCH.1 + Duration::from_nanos(self.last_at_nanos.load(Relaxed));
                Some(LastMessage {
                    message_type: name,
                    at: humantime::format_rfc3339_millis(at).to_string(),
                })
            }
        };
        MailboxSnapshot {
            mailbox: QueueGauge {
                depth,
                capacity: self.capacity,
                high_water: self.high_water.load(Relaxed).max(depth),
            },
            handled: self.handled(),
            handled_by_type,
            last_message,
            handling_seconds: Duration::from_nanos(self.handling_nanos.load(Relaxed)).as_secs_f64(),
        }
    }
}

/// `alloc::vec::Vec<my::Msg>` → `Vec<Msg>`: the type's own name without module paths.
fn short_type_name(full: &str) -> String {
    let mut short = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (index, character) in full.char_indices() {
        if matches!(
            character,
            '<' | '>' | ',' | ' ' | '(' | ')' | '[' | ']' | '&' | ';'
        ) {
            short.push_str(last_path_segment(&full[segment_start..index]));
            short.push(character);
            segment_start = index + character.len_utf8();
        }
    }
    short.push_str(last_path_segment(&full[segment_start..]));
    short
}

fn last_path_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path)
}

/// The mailbox part of an actor's debug view.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MailboxSnapshot {
    pub mailbox: QueueGauge,
    pub handled: u64,
    pub handled_by_type: BTreeMap<String, u64>,
    pub last_message: Option<LastMessage>,
    pub handling_seconds: f64,
}

/// The queue itself: what waits now, how much may wait, and the most that ever waited.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueGauge {
    pub depth: usize,
    pub capacity: usize,
    pub high_water: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LastMessage {
    #[serde(rename = "type")]
    pub message_type: String,
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ping;
    struct Pong;

    #[test]
    fn counts_per_type_and_remembers_the_last_message() {
        let stats = MailboxStats::new(8);
        let now = Instant::now();
        stats.record(
            std::any::type_name::<Ping>(),
            now,
            now + Duration::from_millis(2),
        );
        stats.record(
            std::any::type_name::<Ping>(),
            now,
            now + Duration::from_millis(1),
        );
        stats.record(std::any::type_name::<Pong>(), now, now);
        let snapshot = stats.snapshot(3);
        assert_eq!(snapshot.handled, 3);
        assert_eq!(snapshot.handled_by_type.get("Ping"), Some(&2));
        assert_eq!(snapshot.handled_by_type.get("Pong"), Some(&1));
        assert_eq!(
            snapshot.last_message.map(|last| last.message_type),
            Some("Pong".to_owned())
        );
        assert!((snapshot.handling_seconds - 0.003).abs() < 1e-9);
        assert_eq!(snapshot.mailbox.high_water, 3);
    }

    #[test]
    fn types_beyond_the_table_are_counted_as_other() {
        let stats = MailboxStats::new(1);
        let names: Vec<&'static str> = (0..TYPE_SLOTS + 2)
            .map(|index| &*Box::leak(format!("m{index}").into_boxed_str()))
            .collect();
        let now = Instant::now();
        for name in &names {
            stats.record(name, now, now);
        }
        let snapshot = stats.snapshot(0);
        assert_eq!(snapshot.handled_by_type.get("other"), Some(&2));
        assert_eq!(snapshot.handled_by_type.len(), TYPE_SLOTS + 1);
        assert_eq!(snapshot.handled, u64::try_from(TYPE_SLOTS + 2).unwrap_or(0));
    }

    #[test]
    fn short_names_drop_module_paths_inside_generics() {
        assert_eq!(short_type_name("alloc::vec::Vec<my::Msg>"), "Vec<Msg>");
        assert_eq!(short_type_name("nodepulse_actors::lease::Renew"), "Renew");
    }
}
