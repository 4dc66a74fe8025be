//! The cases of client-go's `events_cache_test.go` (`TestEventCorrelator`,
//! `TestEventAggregatorByReasonFunc`, `TestEventSpamFilter`), with the same limits and
//! intervals; time advances by the case's interval before each Event.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference},
    apimachinery::pkg::apis::meta::v1::Time,
};

use super::*;

fn object(kind: &str, name: &str, namespace: &str) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: Some("C934D34AFB20242".into()),
        api_version: Some("version".into()),
        field_path: Some("spec.containers{mycontainer}".into()),
        ..ObjectReference::default()
    }
}

fn event(reason: &str, message: &str, involved_object: ObjectReference) -> Event {
    Event {
        reason: Some(reason.into()),
        message: Some(message.into()),
        involved_object,
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("kublet.node1".into()),
        }),
        count: Some(1),
        type_: Some("Normal".into()),
        ..Event::default()
    }
}

fn repeated(count: usize, template: &Event) -> Vec<Event> {
    vec![template.clone(); count]
}

fn unique(count: usize) -> Vec<Event> {
    (0..count)
        .map(|i| {
            let involved = object("Pod", &format!("pod-{i}"), &format!("ns-{i}"));
            event(&format!("reason-{i}"), &format!("message-{i}"), involved)
        })
        .collect()
}

/// `makeSimilarEvents`: the template with `prefix-i-<message>` as message.
fn similar(count: usize, template: &Event, prefix: &str) -> Vec<Event> {
    (0..count)
        .map(|i| {
            let mut event = template.clone();
            let message = event.message.take().unwrap_or_default();
            event.message = Some(format!("{prefix}-{i}-{message}"));
            event
        })
        .collect()
}

fn at(now: Timestamp, mut event: Event) -> Event {
    event.first_timestamp = Some(Time(now));
    event.last_timestamp = Some(Time(now));
    event
}

/// Plays `previous` then `new`, `interval` apart, writing what passed as the server would
/// (`UpdateState`); the new Event's outcome.
fn play(
    correlator: &mut Correlator,
    previous: Vec<Event>,
    new: Event,
    interval: i64,
) -> Option<Write> {
    let mut now = Timestamp::from_second(1_800_000_000).expect("a valid time");
    for event in previous {
        now += SignedDuration::from_secs(interval);
        if let Some(write) = correlator.correlate(at(now, event), now) {
            correlator.written(write.event());
        }
    }
    now += SignedDuration::from_secs(interval);
    correlator.correlate(at(now, new), now)
}

/// A case of `TestEventCorrelator`: its name, the Events before, the new one, the seconds
/// between them, and the new one's (count, message), or `None` when dropped as spam.
type Case<'a> = (&'a str, Vec<Event>, Event, i64, Option<(i32, &'a str)>);

#[test]
fn correlator_counts_repeats_aggregates_similar_events_and_filters_spam() {
    let pod = || object("Pod", "my-pod", "my-ns");
    let first = event("first", "i am first", pod());
    let duplicate = event("duplicate", "me again", pod());
    let snowflake = event("unique", "snowflake", pod());
    let mut similar_event = event("similar", "similar message", pod());
    similar_event.involved_object.field_path = Some("spec.containers{container1}".into());
    let aggregate_message = format!("{AGGREGATE_PREFIX}similar message");
    let mut other_container = similar_event.clone();
    other_container.involved_object.field_path = Some("spec.containers{container2}".into());
    let message_of = similar_event.message.clone().unwrap_or_default();

    let cases: Vec<Case> = vec![
        (
            "create-a-single-event",
            vec![],
            first.clone(),
            5,
            Some((1, "i am first")),
        ),
        (
            "the-same-event-should-just-count",
            repeated(1, &duplicate),
            duplicate.clone(),
            5,
            Some((2, "me again")),
        ),
        (
            "the-same-event-should-just-count-even-if-more-than-aggregate",
            repeated(AGGREGATE_MAX_EVENTS, &duplicate),
            duplicate.clone(),
            30,
            Some((11, "me again")),
        ),
        (
            "the-same-event-is-spam-if-happens-too-frequently",
            repeated(26, &duplicate),
            duplicate.clone(),
            1,
            None,
        ),
        (
            "create-many-unique-events",
            unique(30),
            snowflake.clone(),
            5,
            Some((1, "snowflake")),
        ),
        (
            "similar-events-should-aggregate-event",
            similar(AGGREGATE_MAX_EVENTS - 1, &similar_event, &message_of),
            similar_event.clone(),
            5,
            Some((1, &aggregate_message)),
        ),
        (
            "similar-events-many-times-should-count-the-aggregate",
            similar(AGGREGATE_MAX_EVENTS, &similar_event, &message_of),
            similar_event.clone(),
            5,
            Some((2, &aggregate_message)),
        ),
        (
            "events-from-different-containers-do-not-aggregate",
            repeated(1, &other_container),
            similar_event.clone(),
            5,
            Some((1, "similar message")),
        ),
        (
            "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
            similar(AGGREGATE_MAX_EVENTS - 1, &similar_event, &message_of),
            similar_event.clone(),
            AGGREGATE_INTERVAL.as_secs() + 1,
            Some((1, "similar message")),
        ),
    ];
    for (case, previous, new, interval, expected) in cases {
        let reason = new.reason.clone();
        let outcome = play(&mut Correlator::default(), previous, new, interval);
        let Some((count, message)) = expected else {
            assert_eq!(outcome, None, "{case}: dropped as spam");
            continue;
        };
        let write = outcome.unwrap_or_else(|| panic!("{case}: not dropped"));
        let written = write.event();
        assert_eq!(written.count, Some(count), "{case}: count");
        assert_eq!(written.message.as_deref(), Some(message), "{case}: message");
        assert_eq!(written.reason, reason, "{case}: reason");
        let compressed = written.first_timestamp != written.last_timestamp;
        assert_eq!(compressed, count > 1, "{case}: first and last timestamp");
        match (&write, count) {
            (Write::Create(_), 1) => {}
            (Write::Patch { patch, .. }, _) if count > 1 => assert_eq!(
                *patch,
                serde_json::json!({
                    "count": count, "lastTimestamp": written.last_timestamp, "message": message,
                }),
                "{case}: the PATCH of a repeat"
            ),
            _ => panic!("{case}: a count of {count} written as {write:?}"),
        }
    }
}

#[test]
fn a_repeat_patches_the_event_the_server_named() {
    let mut correlator = Correlator::default();
    let now = Timestamp::from_second(1_800_000_000).expect("a valid time");
    let mut first = at(now, event("BackOff", "back-off", object("Pod", "p", "ns")));
    first.metadata.name = Some("p.1".into());
    let Some(Write::Create(created)) = correlator.correlate(first.clone(), now) else {
        panic!("the first occurrence is created");
    };
    correlator.written(&created);
    let later = now + SignedDuration::from_secs(40);
    let mut again = at(later, first);
    again.metadata.name = Some("p.2".into());
    let Some(Write::Patch { event, .. }) = correlator.correlate(again, later) else {
        panic!("the repeat is a PATCH");
    };
    assert_eq!(event.metadata.name.as_deref(), Some("p.1"));
    assert_eq!(event.first_timestamp, Some(Time(now)));
    assert_eq!(event.last_timestamp, Some(Time(later)));
}

#[test]
fn aggregator_key_differs_only_by_message() {
    let pod = || object("Pod", "pod1", "other");
    let (key1, local1) = aggregate_key(&event("end-of-world", "it was fun", pod()));
    let (key2, local2) = aggregate_key(&event("end-of-world", "it was awful", pod()));
    let (key3, _) = aggregate_key(&event("nevermind", "it was a bug", pod()));
    assert_eq!(key1, key2);
    assert_ne!(local1, local2);
    assert_ne!(key1, key3);
}

#[test]
fn spam_filter_is_per_source_and_object_whatever_the_reason() {
    let pod = || object("Pod", "my-pod", "my-ns");
    let other_reason = event("duplicate", "me again", pod());
    let mut correlator = Correlator::default();
    let previous = repeated(25, &event("original", "i am first", pod()));
    assert_eq!(
        play(&mut correlator, previous, other_reason.clone(), 1),
        None
    );
    let other_pod = event("duplicate", "me again", object("Pod", "other-pod", "my-ns"));
    let now = Timestamp::from_second(1_800_000_100).expect("a valid time");
    assert!(correlator.correlate(at(now, other_pod), now).is_some());
}

#[test]
fn spam_filter_refills_one_token_in_five_minutes() {
    let mut correlator = Correlator::default();
    let template = event("BackOff", "back-off", object("Pod", "p", "ns"));
    assert_eq!(
        play(
            &mut correlator,
            repeated(25, &template),
            template.clone(),
            0
        ),
        None
    );
    let start = Timestamp::from_second(1_800_000_000).expect("a valid time");
    let later = start + SignedDuration::from_secs(299);
    assert_eq!(
        correlator.correlate(at(later, template.clone()), later),
        None
    );
    let refilled = start + SignedDuration::from_secs(301);
    assert!(
        correlator
            .correlate(at(refilled, template), refilled)
            .is_some()
    );
}

#[test]
fn caches_are_bounded() {
    let mut correlator = Correlator::new(8);
    let now = Timestamp::from_second(1_800_000_000).expect("a valid time");
    for event in unique(100) {
        if let Some(write) = correlator.correlate(at(now, event), now) {
            correlator.written(write.event());
        }
    }
    assert_eq!(
        (
            correlator.aggregates.len(),
            correlator.observations.len(),
            correlator.spam.len()
        ),
        (8, 8, 8)
    );
}
