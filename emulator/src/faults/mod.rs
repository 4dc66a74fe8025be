//! Fault injection: rules that make matching API requests fail, slow down, hang, lose their
//! connection mid-response or conflict, counters of every fault injected, and whole-server
//! outages (`outage`).
//!
//! Rules are set through [`FaultHandle`] in-process or through the admin API
//! (`/emulator/v1/faults`, see `admin`). The HTTP layer asks [`FaultHandle::decide`] once per
//! API request; this module never touches the store.

pub mod admin;
pub mod outage;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::Verb;
pub use outage::{Outage, OutageError, OutageReport, Serving};

/// What to do to a matching request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultAction {
    /// Answer with a `Status` error of this HTTP code (reason derived from the code).
    Error {
        code: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Delay the request, then serve it normally.
    Latency { millis: u64 },
    /// Never answer.
    Hang,
    /// Start a response and drop the connection halfway through it.
    DropConnection,
    /// Answer 409 Conflict as if the object had been modified concurrently.
    Conflict,
}

/// Which requests a rule applies to (unset fields match anything) and how often it fires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<Verb>,
    /// The resource plural (`leases`, `nodes`, `pods`, `events`, `namespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `status` to match only `/status` requests, `""` to match only main-resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub action: FaultAction,
    /// Chance that a matching request is faulted (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// Fault only the next N matching requests (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
    /// The `Retry-After` (and `details.retryAfterSeconds`) of an `Error` answer. Default: 1 for
    /// 429, 503 and 504, none for other codes (a 500 `InternalError` has none); 0 sends none,
    /// as kube-apiserver writes the header only for a positive `retryAfterSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl FaultRule {
    /// A rule applying `action` to every request.
    pub fn new(action: FaultAction) -> Self {
        FaultRule {
            verb: None,
            resource: None,
            subresource: None,
            namespace: None,
            name: None,
            action,
            probability: None,
            times: None,
            retry_after_seconds: None,
        }
    }
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }
    pub fn resource(mut self, plural: &str) -> Self {
        self.resource = Some(plural.into());
        self
    }
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }
    pub fn probability(mut self, probability: f64) -> Self {
        self.probability = Some(probability);
        self
    }
    pub fn times(mut self, times: u64) -> Self {
        self.times = Some(times);
        self
    }
    /// The `Retry-After` seconds of an `Error` answer (0: none).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = Some(seconds);
        self
    }

    fn matches(&self, request: &RequestFacts<'_>) -> bool {
        let field = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.verb.is_none_or(|v| v == request.verb)
            && field(&self.resource, request.resource)
            && field(&self.subresource, request.subresource)
            && field(&self.namespace, request.namespace)
            && field(&self.name, request.name)
    }
}

/// The facts about one request that rules match on.
#[derive(Clone, Copy, Debug)]
pub struct RequestFacts<'a> {
    pub verb: Verb,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Identifies an injected rule.
pub type FaultId = u64;

/// A rule with its counters, as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultStatus {
    pub id: FaultId,
    pub rule: FaultRule,
    /// Requests that matched the rule's filters.
    pub matched: u64,
    /// Requests the rule actually faulted.
    pub injected: u64,
}

/// Totals of injected faults by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultCounters {
    pub errors: u64,
    pub latencies: u64,
    pub hangs: u64,
    pub dropped_connections: u64,
    pub conflicts: u64,
}

impl FaultCounters {
    /// All injected faults.
    pub fn total(&self) -> u64 {
        self.errors + self.latencies + self.hangs + self.dropped_connections + self.conflicts
    }
}

/// The outcome for one request: a delay to add, then possibly a terminal fault.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub delay: Duration,
    pub fault: Option<FaultAction>,
    /// The firing rule's `retryAfterSeconds`, for an `Error` fault.
    pub retry_after_seconds: Option<u64>,
}

#[derive(Default)]
struct State {
    next_id: FaultId,
    rules: Vec<FaultStatus>,
    counters: FaultCounters,
}

/// The fault-injection handle, shared by the admin API, tests and the HTTP layer. Cheap to clone.
#[derive(Clone, Default)]
pub struct FaultHandle {
    state: Arc<Mutex<State>>,
    outages: outage::OutageSwitch,
}

impl FaultHandle {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a rule; rules are evaluated in the order they were added.
    pub fn inject(&self, rule: FaultRule) -> FaultId {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        tracing::info!(id, ?rule, "fault rule injected");
        state.rules.push(FaultStatus {
            id,
            rule,
            matched: 0,
            injected: 0,
        });
        id
    }

    /// Removes one rule; false if there was none with this id.
    pub fn remove(&self, id: FaultId) -> bool {
        let mut state = self.lock();
        let before = state.rules.len();
        state.rules.retain(|r| r.id != id);
        state.rules.len() != before
    }

    /// Removes every rule (counters are kept).
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// The rules with their per-rule counters.
    pub fn rules(&self) -> Vec<FaultStatus> {
        self.lock().rules.clone()
    }

    /// Totals of injected faults since start.
    pub fn counters(&self) -> FaultCounters {
        self.lock().counters.clone()
    }

    /// Takes the whole server down for `outage` (see [`outage`]) and returns at once; the
    /// listener closes within milliseconds.
    pub fn schedule_outage(&self, outage: Outage) -> Result<(), OutageError> {
        self.outages.schedule(outage, Duration::ZERO)
    }

    /// [`FaultHandle::schedule_outage`] for the admin API: starts once its answer is sent.
    pub(crate) fn schedule_outage_after_answer(&self, outage: Outage) -> Result<(), OutageError> {
        self.outages.schedule(outage, Duration::from_millis(100))
    }

    /// Takes the whole server down for `outage` and waits until it accepts connections again.
    pub async fn outage(&self, outage: Outage) -> Result<OutageReport, OutageError> {
        let completed = self.outages.serving().completed;
        self.outages.schedule(outage, Duration::ZERO)?;
        self.outages.over(completed + 1).await
    }

    /// Waits until the outage scheduled or under way is over (at once when none is); the
    /// report of the last outage.
    pub async fn outage_over(&self) -> Result<OutageReport, OutageError> {
        let serving = self.outages.serving();
        let under_way = serving.pending.is_some() || serving.down;
        self.outages
            .over(serving.completed + u64::from(under_way))
            .await
    }

    /// Whether the server is up, and the times of its last outage.
    pub fn serving(&self) -> Serving {
        self.outages.serving()
    }

    pub(crate) fn outage_switch(&self) -> &outage::OutageSwitch {
        &self.outages
    }

    /// Decides what happens to a request: latency rules add up, the first firing terminal rule
    /// wins. Exhausted `times` rules no longer fire.
    pub fn decide(&self, request: &RequestFacts<'_>) -> Decision {
        let mut state = self.lock();
        let State {
            rules, counters, ..
        } = &mut *state;
        let mut decision = Decision::default();
        for status in rules.iter_mut() {
            if !status.rule.matches(request) {
                continue;
            }
            status.matched += 1;
            if status.rule.times.is_some_and(|t| status.injected >= t) {
                continue;
            }
            let p = status.rule.probability.unwrap_or(1.0);
            if p < 1.0 && rand::random::<f64>() >= p {
                continue;
            }
            status.injected += 1;
            let action = &status.rule.action;
            match action {
                FaultAction::Latency { millis } => decision.delay += Duration::from_millis(*millis),
                FaultAction::Error { .. } => counters.errors += 1,
                FaultAction::Hang => counters.hangs += 1,
                FaultAction::DropConnection => counters.dropped_connections += 1,
                FaultAction::Conflict => counters.conflicts += 1,
            }
            if matches!(action, FaultAction::Latency { .. }) {
                counters.latencies += 1;
                continue;
            }
            tracing::debug!(
                id = status.id,
                verb = request.verb.as_str(),
                request.resource,
                request.name,
                "fault injected"
            );
            decision.fault = Some(action.clone());
            decision.retry_after_seconds = status.rule.retry_after_seconds;
            break;
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease_update(name: &str) -> RequestFacts<'_> {
        RequestFacts {
            verb: Verb::Update,
            resource: "leases",
            subresource: "",
            namespace: "kube-node-lease",
            name,
        }
    }

    #[test]
    fn next_n_rules_fire_exactly_n_times_and_count() {
        let faults = FaultHandle::default();
        let id = faults.inject(
            FaultRule::new(FaultAction::Error {
                code: 503,
                message: None,
            })
            .resource("leases")
            .times(2),
        );
        let fired: Vec<bool> = (0..4)
            .map(|_| faults.decide(&lease_update("n1")).fault.is_some())
            .collect();
        assert_eq!(fired, [true, true, false, false]);
        assert_eq!(faults.counters().errors, 2);
        let status = faults
            .rules()
            .into_iter()
            .find(|r| r.id == id)
            .expect("rule kept");
        assert_eq!((status.matched, status.injected), (4, 2));
    }

    #[test]
    fn filters_select_requests_and_latency_composes_with_a_terminal_fault() {
        let faults = FaultHandle::default();
        faults.inject(FaultRule::new(FaultAction::Latency { millis: 30 }).verb(Verb::Update));
        faults.inject(FaultRule::new(FaultAction::Conflict).name("n2"));
        let d = faults.decide(&lease_update("n1"));
        assert_eq!((d.delay, d.fault), (Duration::from_millis(30), None));
        let d = faults.decide(&lease_update("n2"));
        assert_eq!(d.fault, Some(FaultAction::Conflict));
        let get = RequestFacts {
            verb: Verb::Get,
            ..lease_update("n1")
        };
        assert_eq!(faults.decide(&get), Decision::default());
    }

    #[test]
    fn zero_probability_never_fires_and_rules_can_be_removed() {
        let faults = FaultHandle::default();
        faults.inject(FaultRule::new(FaultAction::Hang).probability(0.0));
        let id = faults.inject(FaultRule::new(FaultAction::DropConnection));
        assert_eq!(
            faults.decide(&lease_update("n1")).fault,
            Some(FaultAction::DropConnection)
        );
        assert!(faults.remove(id));
        assert_eq!(faults.decide(&lease_update("n1")).fault, None);
        assert_eq!(faults.counters().total(), 1);
    }
}
