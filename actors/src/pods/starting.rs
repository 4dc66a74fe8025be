//! A pod provider whose start can fail (the CRI provider: its pod logs directory, its thread).
//! A failed start is not a node that quietly runs nothing: it is logged, it keeps the node
//! NotReady through a health check (`<name> is not healthy: cannot start: <why>`), it shows in
//! the debug state, and it is tried again with back-off. Once the provider starts, it gets the
//! pods the watch reported meanwhile; from then on this only passes calls through.

use std::{
    collections::BTreeMap,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tokio::time::Instant;

use super::provider::{PodLifecycleProvider, PodUpdate, ProviderFault, UpdateSink};
use crate::{
    kept_pod::KeptPod,
    messages::StopPod,
    ports::{HealthCheck, PodStats},
    prober::ProberOutput,
};

/// Why a provider could not start (its own error type, displayed as it says).
pub type StartError = Box<dyn std::error::Error + Send + Sync>;
/// Builds the provider; called again after each failure.
pub type Start = Box<dyn FnMut() -> Result<Box<dyn PodLifecycleProvider>, StartError> + Send>;

/// The wait after the first failed start, doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(10);

/// The wait after `failures` failed starts.
fn retry_after(failures: u32) -> Duration {
    FIRST_RETRY
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)))
        .min(MAX_RETRY)
}

fn later(now: Timestamp, by: Duration) -> Timestamp {
    SignedDuration::try_from(by)
        .ok()
        .and_then(|by| now.checked_add(by).ok())
        .unwrap_or(now)
}

/// The health check of a start: unhealthy while the provider has not started.
#[derive(Debug)]
pub struct StartHealth {
    name: String,
    error: RwLock<Option<String>>,
}

impl StartHealth {
    fn set(&self, error: Option<String>) {
        *self.error.write().unwrap_or_else(PoisonError::into_inner) = error;
    }
}

impl HealthCheck for StartHealth {
    fn name(&self) -> &str {
        &self.name
    }

    fn unhealthy(&self, _: Instant) -> Option<String> {
        let error = self.error.read().unwrap_or_else(PoisonError::into_inner);
        error.as_ref().map(|error| format!("cannot start: {error}"))
    }
}

pub struct StartingProvider {
    start: Start,
    provider: Option<Box<dyn PodLifecycleProvider>>,
    health: Arc<StartHealth>,
    /// The pods the watch reported while there was no provider, by UID.
    pods: BTreeMap<String, KeptPod>,
    listed: bool,
    sink: Option<UpdateSink>,
    failures: u32,
    last_error: Option<String>,
    next_attempt: Timestamp,
    stopped: bool,
}

impl StartingProvider {
    /// Starts the provider `name` (as the Ready message names it) at once; a failure is
    /// tried again from `now` on.
    pub fn new(name: &str, start: Start, now: Timestamp) -> Self {
        let mut starting = Self {
            start,
            provider: None,
            health: Arc::new(StartHealth {
                name: name.to_owned(),
                error: RwLock::new(None),
            }),
            pods: BTreeMap::new(),
            listed: false,
            sink: None,
            failures: 0,
            last_error: None,
            next_attempt: now,
            stopped: false,
        };
        let updates = starting.attempt(now);
        debug_assert!(updates.is_empty(), "no pods before the first attempt");
        starting
    }

    /// Its health check, for NodeStatus's Ready.
    pub fn health(&self) -> Arc<StartHealth> {
        Arc::clone(&self.health)
    }

    /// Tries to start the provider, if due; what the started provider says of the pods it
    /// was handed.
    fn attempt(&mut self, now: Timestamp) -> Vec<PodUpdate> {
        if self.provider.is_some() || self.stopped || now < self.next_attempt {
            return Vec::new();
        }
        let name = self.health.name.clone();
        match (self.start)() {
            Ok(mut provider) => {
                if self.failures > 0 {
                    tracing::info!(provider = %name, failures = self.failures, "the pod provider started");
                }
                if let Some(sink) = &self.sink {
                    provider.set_update_sink(Arc::clone(sink));
                }
                let mut updates: Vec<PodUpdate> = (self.pods.values())
                    .flat_map(|pod| provider.pod_applied(pod, now))
                    .collect();
                if self.listed {
                    provider.pods_listed();
                }
                updates.extend(provider.tick(now));
                self.pods.clear();
                self.health.set(None);
                self.last_error = None;
                self.provider = Some(provider);
                updates
            }
            Err(error) => {
                self.failures += 1;
                let wait = retry_after(self.failures);
                self.next_attempt = later(now, wait);
                tracing::error!(provider = %name, %error, retry_in = ?wait, failures = self.failures, "cannot start the pod provider; the node is not Ready until it starts");
                self.health.set(Some(error.to_string()));
                self.last_error = Some(error.to_string());
                Vec::new()
            }
        }
    }
}

impl PodLifecycleProvider for StartingProvider {
    fn pod_applied(&mut self, pod: &KeptPod, now: Timestamp) -> Vec<PodUpdate> {
        if let Some(provider) = &mut self.provider {
            return provider.pod_applied(pod, now);
        }
        if let Some(uid) = pod.uid() {
            self.pods.insert(uid.to_owned(), pod.clone());
        }
        Vec::new()
    }

    fn pod_deleted(&mut self, pod: &Pod) {
        match &mut self.provider {
            Some(provider) => provider.pod_deleted(pod),
            None => {
                if let Some(uid) = &pod.metadata.uid {
                    self.pods.remove(uid);
                }
            }
        }
    }

    fn pods_listed(&mut self) {
        match &mut self.provider {
            Some(provider) => provider.pods_listed(),
            None => self.listed = true,
        }
    }

    fn tick(&mut self, now: Timestamp) -> Vec<PodUpdate> {
        match &mut self.provider {
            Some(provider) => provider.tick(now),
            None => self.attempt(now),
        }
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        match &self.provider {
            Some(provider) => provider.next_wakeup(),
            None => (!self.stopped).then_some(self.next_attempt),
        }
    }

    /// Without a provider nothing of the pod runs: there is nothing to stop.
    fn stop_pod(&mut self, stop: &StopPod, now: Timestamp) -> Vec<PodUpdate> {
        (self.provider.as_mut()).map_or_else(Vec::new, |provider| provider.stop_pod(stop, now))
    }

    fn set_pod_cidrs(&mut self, cidrs: &str, now: Timestamp) -> Vec<PodUpdate> {
        (self.provider.as_mut())
            .map_or_else(Vec::new, |provider| provider.set_pod_cidrs(cidrs, now))
    }

    fn volumes_changed(&mut self, pod_uid: &str, now: Timestamp) -> Vec<PodUpdate> {
        (self.provider.as_mut())
            .map_or_else(Vec::new, |provider| provider.volumes_changed(pod_uid, now))
    }

    fn prober_output(&mut self, output: &ProberOutput, now: Timestamp) -> Vec<PodUpdate> {
        (self.provider.as_mut())
            .map_or_else(Vec::new, |provider| provider.prober_output(output, now))
    }

    fn set_update_sink(&mut self, sink: UpdateSink) {
        if let Some(provider) = &mut self.provider {
            provider.set_update_sink(Arc::clone(&sink));
        }
        self.sink = Some(sink);
    }

    fn stop(&mut self) {
        self.stopped = true;
        if let Some(provider) = &mut self.provider {
            provider.stop();
        }
    }

    fn inject_fault(&mut self, fault: ProviderFault) -> bool {
        (self.provider.as_mut()).is_some_and(|provider| provider.inject_fault(fault))
    }

    fn active_pods(&self) -> Vec<PodStats> {
        (self.provider.as_ref()).map_or_else(Vec::new, |provider| provider.active_pods())
    }

    fn debug_state(&self) -> serde_json::Value {
        match &self.provider {
            Some(provider) => provider.debug_state(),
            None => json!({
                "provider": "none",
                "starting": self.health.name,
                "error": self.last_error,
                "failedStarts": self.failures,
                "nextAttempt": self.next_attempt.to_string(),
                "podsWaiting": self.pods.len(),
            }),
        }
    }
}

#[cfg(test)]
#[path = "starting_tests.rs"]
mod tests;
