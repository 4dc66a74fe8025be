//! Event recording as client-go's recorder does it (`tools/record/event.go`), shared by node
//! and pod Events: each source's Events are queued and written one at a time ([`sink`]), each
//! decided by the correlator ([`correlator`]) when its turn comes: a POST for a new Event, a
//! strategic-merge PATCH of `count`, `lastTimestamp` and `message` for a repeat, and a POST
//! again when that PATCH answers 404 (the Event was deleted or expired).

pub mod correlator;
mod lru;
pub mod sink;

use std::{collections::HashMap, sync::Mutex};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use nodepulse_actors::ports::ApiResult;

use self::correlator::Correlator;
use super::KubeApi;

/// `source.component` and `reportingComponent` of every Event the node writes: the kubelet's,
/// as its recorder sets them (`EventSource{Component: "kubelet"}`), because clients select a
/// node's Events by it (`kubectl get events --field-selector source=kubelet`, the upstream
/// "Events should be sent by kubelets" spec, event exporters' filters).
pub const COMPONENT: &str = "kubelet";

/// A correlator per event source host, as every kubelet has its own: a fleet's nodes share
/// one client, and one 4096-entry cache for all of them would forget a node's repeats. Each
/// is bounded; there are as many as nodes that recorded an Event.
#[derive(Default)]
pub struct Correlators(Mutex<HashMap<String, Correlator>>);

impl Correlators {
    /// Runs `act` on the correlator of the Events whose source is `host`.
    fn with<T>(&self, host: String, act: impl FnOnce(&mut Correlator) -> T) -> T {
        let mut correlators = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        act(correlators.entry(host).or_default())
    }
}

fn host(event: &Event) -> String {
    event
        .source
        .as_ref()
        .and_then(|source| source.host.clone())
        .unwrap_or_default()
}

impl KubeApi {
    /// Records `event` (built with its timestamps at `now`): queued behind its source's
    /// earlier Events, then decided by the correlator and written ([`sink`]). Resolves once it
    /// is written, dropped (spam filter, full queue) or failed for good.
    pub(super) fn record(&self, event: Event, now: Timestamp) -> BoxFuture<'static, ApiResult<()>> {
        self.events.record(event, now)
    }
}
