//! client-go's event correlator (`tools/record/events_cache.go`), a pure core: it folds a
//! repeated Event into one object whose `count` is PATCHed, aggregates similar Events (same
//! object and reason, another message) into a `(combined from similar events)` one, and drops
//! an object's Events past a token bucket. It takes `now` and does no I/O; its caches are LRUs.

use std::collections::HashSet;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::core::v1::Event,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};
use serde_json::json;

use super::lru::Lru;

/// Entries each cache keeps (`maxLruCacheEntries`).
pub const MAX_LRU_CACHE_ENTRIES: usize = 4096;
/// Distinct messages of similar Events before they are aggregated (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long similar Events count towards aggregation (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);
/// The spam filter's bucket per source and object (`defaultSpamBurst`, `defaultSpamQPS`).
pub const SPAM_BURST: f64 = 25.0;
pub const SPAM_QPS: f64 = 1.0 / 300.0;
/// The message of an aggregate (`EventAggregatorByReasonMessageFunc`).
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";

/// What to send for an Event that passed the correlator.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// POST the Event.
    Create(Event),
    /// A repeat: PATCH the Event of this name with `patch` (strategic merge); `event` is the
    /// whole of it, to create when the PATCH answers 404 (the Event was deleted or expired).
    Patch {
        event: Event,
        patch: serde_json::Value,
    },
}

impl Write {
    pub fn event(&self) -> &Event {
        match self {
            Self::Create(event) | Self::Patch { event, .. } => event,
        }
    }
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Timestamp,
}

struct Aggregate {
    messages: HashSet<String>,
    last: Timestamp,
}

#[derive(Clone)]
struct Observation {
    count: i32,
    first: Option<Time>,
    name: Option<String>,
}

/// One event source's correlator (the kubelet has one per node).
pub struct Correlator {
    aggregates: Lru<Aggregate>,
    observations: Lru<Observation>,
    spam: Lru<Bucket>,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::new(MAX_LRU_CACHE_ENTRIES)
    }
}

fn source(event: &Event) -> [&str; 2] {
    let source = event.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()).unwrap_or(""),
        source.and_then(|s| s.host.as_deref()).unwrap_or(""),
    ]
}

fn text(field: Option<&String>) -> &str {
    field.map_or("", String::as_str)
}

/// The fields joined with a separator no field holds (client-go joins them with none).
fn join(fields: &[&str]) -> String {
    fields.join("\u{0}")
}

/// `getEventKey`: an Event's identity for counting repeats (the message included).
pub fn event_key(event: &Event) -> String {
    let object = &event.involved_object;
    let [component, host] = source(event);
    join(&[
        component,
        host,
        text(object.kind.as_ref()),
        text(object.namespace.as_ref()),
        text(object.name.as_ref()),
        text(object.field_path.as_ref()),
        text(object.uid.as_ref()),
        text(object.api_version.as_ref()),
        text(event.type_.as_ref()),
        text(event.reason.as_ref()),
        text(event.message.as_ref()),
    ])
}

/// `getSpamKey`: the source and the object (and the type), whatever the reason.
pub fn spam_key(event: &Event) -> String {
    let object = &event.involved_object;
    let [component, host] = source(event);
    join(&[
        component,
        host,
        text(object.kind.as_ref()),
        text(object.namespace.as_ref()),
        text(object.name.as_ref()),
        text(object.uid.as_ref()),
        text(object.api_version.as_ref()),
        text(event.type_.as_ref()),
    ])
}

/// `EventAggregatorByReasonFunc`: the key of similar Events (all but the message, which is
/// the second part), so Events that differ only in their message are aggregated.
pub fn aggregate_key(event: &Event) -> (String, String) {
    let object = &event.involved_object;
    let [component, host] = source(event);
    let key = join(&[
        component,
        host,
        text(object.kind.as_ref()),
        text(object.namespace.as_ref()),
        text(object.name.as_ref()),
        text(object.uid.as_ref()),
        text(object.api_version.as_ref()),
        text(event.type_.as_ref()),
        text(event.reason.as_ref()),
        text(event.reporting_component.as_ref()),
        text(event.reporting_instance.as_ref()),
    ]);
    (key, text(event.message.as_ref()).to_owned())
}

impl Correlator {
    pub fn new(cache_entries: usize) -> Self {
        Self {
            aggregates: Lru::new(cache_entries),
            observations: Lru::new(cache_entries),
            spam: Lru::new(cache_entries),
        }
    }

    /// `EventCorrelate`: what to write for `event` (whose timestamps are `now`), or `None`
    /// when the spam filter drops it. Call [`Self::written`] with the server's answer.
    pub fn correlate(&mut self, event: Event, now: Timestamp) -> Option<Write> {
        let (event, key) = self.aggregate(event, now);
        let write = self.observe(event, key);
        self.accept(write.event(), now).then_some(write)
    }

    /// `UpdateState`: remembers the Event as the server stored it (its name and count).
    pub fn written(&mut self, event: &Event) {
        self.observations.put(event_key(event), observation(event));
    }

    /// `EventAggregate`: the Event, or its aggregate once the object had
    /// [`AGGREGATE_MAX_EVENTS`] distinct messages for this reason within
    /// [`AGGREGATE_INTERVAL`]; and the key its repeats are counted under.
    fn aggregate(&mut self, event: Event, now: Timestamp) -> (Event, String) {
        let (key, message) = aggregate_key(&event);
        let fresh = || Aggregate {
            messages: HashSet::new(),
            last: now,
        };
        let mut record = self.aggregates.take(&key).unwrap_or_else(fresh);
        if now.duration_since(record.last) > AGGREGATE_INTERVAL {
            record = fresh();
        }
        record.messages.insert(message);
        record.last = now;
        let similar = record.messages.len();
        if similar >= AGGREGATE_MAX_EVENTS {
            // client-go pops any one of the messages from the stored set, so the next new
            // message aggregates again and a repeat of a remembered one does not.
            if let Some(any) = record.messages.iter().next().cloned() {
                record.messages.remove(&any);
            }
        }
        self.aggregates.put(key.clone(), record);
        if similar < AGGREGATE_MAX_EVENTS {
            let event_key = event_key(&event);
            return (event, event_key);
        }
        let object = event.involved_object.clone();
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(event_name(object.name.as_deref().unwrap_or(""), now)),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            message: Some(format!(
                "{AGGREGATE_PREFIX}{}",
                text(event.message.as_ref())
            )),
            involved_object: object,
            type_: event.type_,
            reason: event.reason,
            source: event.source,
            ..Event::default()
        };
        (aggregate, key)
    }

    /// `eventObserve`: a repeat of what is under `key` takes the first Event's name and first
    /// timestamp and the next count, and is written as a PATCH.
    fn observe(&mut self, mut event: Event, key: String) -> Write {
        let last = self.observations.get_mut(&key).cloned();
        let write = match last.filter(|last| last.count > 0) {
            None => Write::Create(event),
            Some(last) => {
                event.metadata.name = last.name;
                event.first_timestamp = last.first;
                event.count = Some(last.count + 1);
                let mut patch =
                    json!({ "count": event.count, "lastTimestamp": event.last_timestamp });
                if let Some(message) = event.message.as_ref().filter(|m| !m.is_empty()) {
                    patch["message"] = json!(message);
                }
                Write::Patch { event, patch }
            }
        };
        self.observations.put(key, observation(write.event()));
        write
    }

    /// `EventSourceObjectSpamFilter.Filter`: whether the source and object have a token left.
    fn accept(&mut self, event: &Event, now: Timestamp) -> bool {
        let key = spam_key(event);
        let mut bucket = self.spam.take(&key).unwrap_or(Bucket {
            tokens: SPAM_BURST,
            at: now,
        });
        let elapsed = now.duration_since(bucket.at).as_secs_f64().max(0.0);
        bucket.tokens = (bucket.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        bucket.at = now;
        let accepted = bucket.tokens >= 1.0;
        if accepted {
            bucket.tokens -= 1.0;
        }
        self.spam.put(key, bucket);
        accepted
    }
}

fn observation(event: &Event) -> Observation {
    Observation {
        count: event.count.unwrap_or(0),
        first: event.first_timestamp.clone(),
        name: event.metadata.name.clone(),
    }
}

/// An Event's name as client-go makes it: the object's name and the time in hex nanoseconds.
pub fn event_name(object: &str, now: Timestamp) -> String {
    format!("{object}.{:x}", now.as_nanosecond())
}

#[cfg(test)]
#[path = "correlator_tests.rs"]
mod tests;
