//! Event recording as client-go's recorder does it (`tools/record/event.go`), shared by node
//! and pod Events: the correlator decides ([`correlator`]), this module writes: a POST for a
//! new Event, a strategic-merge PATCH of `count`, `lastTimestamp` and `message` for a repeat,
//! and a POST again when that PATCH answers 404 (the Event was deleted or expired).

pub mod correlator;
mod lru;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodepulse_actors::ports::{ApiError, ApiResult};

use self::correlator::{Correlator, Write};
use super::{KubeApi, timed};

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
    /// Records `event` (built with its timestamps at `now`) through the correlator. An Event
    /// the spam filter or the event rate limit drops resolves at once. A failed write is not
    /// retried here beyond the client's own `Retry-After` retries, unlike client-go's 12 tries
    /// 10 s apart: the correlator has counted the occurrence, so the next repeat writes the
    /// whole count, and a node (or a fleet of them) holding minutes of stale Events per
    /// occurrence would send them all at once when an unreachable server returns.
    pub(super) fn record(&self, event: Event, now: Timestamp) -> BoxFuture<'static, ApiResult<()>> {
        let Some(write) = self
            .correlators
            .with(host(&event), |c| c.correlate(event, now))
        else {
            tracing::debug!("the event spam filter drops an event about an object");
            return Box::pin(async { Ok(()) });
        };
        // Beside the spam filter, which bounds each object, the limit bounds how many objects'
        // Events are written a second (the kubelet's eventRecordQPS/eventBurst).
        if self.event_limiter.check().is_err() {
            let reason = write.event().reason.clone().unwrap_or_default();
            tracing::warn!(%reason, "event rate limit reached; the event is dropped");
            return Box::pin(async { Ok(()) });
        }
        let namespace = write
            .event()
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let (main, fallback) = (self.main_client_handle(), self.main_client_handle());
        let (correlators, timeout) = (Arc::clone(&self.correlators), self.heartbeat_timeout());
        Box::pin(async move {
            let events = Api::<Event>::namespaced(main.await, &namespace);
            let create = |api: Api<Event>, mut event: Event| async move {
                event.metadata.resource_version = None;
                timed(timeout, api.create(&PostParams::default(), &event)).await
            };
            let written = match write {
                Write::Create(event) => create(events, event).await?,
                Write::Patch { event, patch } => {
                    let name = event.metadata.name.clone().unwrap_or_default();
                    let (params, patch) = (PatchParams::default(), Patch::Strategic(&patch));
                    match timed(timeout, events.patch(&name, &params, &patch)).await {
                        Err(ApiError::NotFound(_)) => {
                            let events = Api::<Event>::namespaced(fallback.await, &namespace);
                            create(events, event).await?
                        }
                        other => other?,
                    }
                }
            };
            correlators.with(host(&written), |c| c.written(&written));
            Ok(())
        })
    }
}
