//! RuntimeProbeActor: every runtime probe period it asks the container runtime for its status
//! over CRI (the kubelet's updateRuntimeUp) and tells NodeStatusActor the result as
//! `RuntimeHealth`: at once when anything changed, and every period regardless, so staleness
//! is judged on fresh news. A simulated runtime has nothing to ask: it is reported healthy
//! once, and is never woken again. It owns the runtime state (kept across its restarts) and the pod
//! CIDR last pushed to the runtime; it never blocks: each probe runs beside its mailbox.

mod capabilities;
mod state;

use std::{
    sync::{Arc, MutexGuard},
    time::Duration,
};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, WrapFuture};
use jiff::Timestamp;
use nodepulse_supervisor::{Kept, Recipient, SupervisedActor};
use serde_json::json;
use tokio::time::Instant;

pub use crate::ports::{RuntimeCapabilities, UnknownHandler};
pub use capabilities::CapabilitiesView;
pub use state::{NETWORK_STATE_UNKNOWN, RuntimeState, render_condition};

use crate::{
    clock::{self, WallClock},
    messages::RuntimeHealth,
    ports::{
        ImageInfo, RuntimeError, RuntimeResult, RuntimeService, RuntimeStatus, RuntimeVersion,
    },
};

/// The name RuntimeProbeActor has in the supervisor, logs and the debug endpoint.
pub const NAME: &str = "runtime-probe";

/// What the RuntimeProbeActor is configured with.
#[derive(Debug, Clone)]
pub struct RuntimeProbeSettings {
    /// How often the runtime is probed and health is sent (5 s, as the kubelet's).
    pub probe_period: Duration,
    /// `runtimeRequestTimeout`: bound on each CRI call.
    pub request_timeout: Duration,
}

/// What outlives one actor instance (handed to every generation in a [`Kept`]): the runtime
/// state and the pod CIDR pushed last.
#[derive(Debug, Default)]
pub struct ProbeStore {
    pub state: RuntimeState,
    pub pod_cidr: Option<String>,
}

/// NodeStatusActor → RuntimeProbeActor: the Node's `spec.podCIDRs`, joined with ",". A new
/// value is pushed to the runtime once with CRI `UpdateRuntimeConfig` (the kubelet's
/// updatePodCIDR); the reply says whether it changed, which forces a status PATCH.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "bool")]
pub struct UpdatePodCidr(pub String);

/// Status; Version when it is not known yet; ListImages after a good Status.
type ProbeResult = (
    RuntimeResult<RuntimeStatus>,
    Option<RuntimeResult<RuntimeVersion>>,
    Option<RuntimeResult<Vec<ImageInfo>>>,
);

pub struct RuntimeProbeActor {
    settings: RuntimeProbeSettings,
    /// `None`: a simulated runtime, always healthy.
    runtime: Option<Arc<dyn RuntimeService>>,
    health: Recipient<RuntimeHealth>,
    store: Kept<ProbeStore>,
    probe_started: Option<Instant>,
    probes: u64,
    failures_in_a_row: u64,
    last_failure: Option<(Timestamp, String)>,
    last_sent: Option<RuntimeHealth>,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
    /// Where the pods' provider reads the handlers and features.
    capabilities: Option<Arc<CapabilitiesView>>,
}

impl RuntimeProbeActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }

    /// Publishes the runtime's handlers and features to `view` after each good probe.
    #[must_use]
    pub fn with_capabilities_view(mut self, view: Arc<CapabilitiesView>) -> Self {
        self.capabilities = Some(view);
        self
    }
}

impl RuntimeProbeActor {
    /// `store` outlives the instance: the factory hands every instance the same one.
    pub fn new(
        settings: RuntimeProbeSettings,
        runtime: Option<Arc<dyn RuntimeService>>,
        health: Recipient<RuntimeHealth>,
        store: Kept<ProbeStore>,
    ) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            runtime,
            health,
            store,
            probe_started: None,
            probes: 0,
            failures_in_a_row: 0,
            last_failure: None,
            last_sent: None,
            capabilities: None,
        }
    }

    fn store(&self) -> MutexGuard<'_, ProbeStore> {
        self.store.lock()
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.probe_started.is_some() {
            self.send_health(); // a probe hangs: freshness goes out regardless
        }
        self.start_probe(ctx);
    }

    /// A simulated runtime has nothing to ask and never goes stale (NodeStatus does not age
    /// its health): its health is sent once, and again each period only until delivered.
    fn resend_until_delivered(&mut self, ctx: &mut Context<Self>) {
        if self.last_sent.is_some() {
            return;
        }
        ctx.run_later(self.settings.probe_period, |actor, ctx| {
            actor.start_probe(ctx);
            actor.resend_until_delivered(ctx);
        });
    }

    fn start_probe(&mut self, ctx: &mut Context<Self>) {
        let Some(runtime) = self.runtime.clone() else {
            self.store().state = RuntimeState::simulated(Instant::now());
            self.send_health();
            return;
        };
        if self.probe_started.is_some() {
            return; // a slow probe is never stacked on (the kubelet serialises them too)
        }
        self.probe_started = Some(Instant::now());
        let timeout = self.settings.request_timeout;
        let need_version =
            self.store().state.runtime_version.is_none() || self.failures_in_a_row > 0;
        let probe = async move {
            let status = bounded(timeout, "Status", runtime.status()).await;
            let version = if status.is_ok() && need_version {
                Some(bounded(timeout, "Version", runtime.version()).await)
            } else {
                None
            };
            let images = if status.is_ok() {
                Some(bounded(timeout, "ListImages", runtime.list_images()).await)
            } else {
                None
            };
            (status, version, images)
        };
        // Spawned, not awaited: the mailbox and liveness pings stay served while a call waits.
        ctx.spawn(
            probe
                .into_actor(self)
                .map(|result, actor, _| actor.finish_probe(result)),
        );
    }

    fn finish_probe(&mut self, (status, version, images): ProbeResult) {
        self.probe_started = None;
        self.probes += 1;
        let now = Instant::now();
        match status {
            Ok(status) => {
                self.failures_in_a_row = 0;
                let mut store = self.store();
                store.state.apply_status(&status, now);
                if let (Some(view), None) = (&self.capabilities, &store.state.runtime_error) {
                    view.set(store.state.capabilities.clone());
                }
            }
            Err(error) => {
                self.failures_in_a_row += 1;
                tracing::warn!(%error, failures_in_a_row = self.failures_in_a_row, "container runtime status check failed");
                self.store().state.apply_failure(&error);
                self.last_failure = Some(((self.wall_clock)(), error.to_string()));
            }
        }
        match version {
            Some(Ok(version)) => self.store().state.apply_version(&version),
            Some(Err(error)) => tracing::warn!(%error, "container runtime version check failed"),
            None => {}
        }
        match images {
            Some(Ok(images)) => self.store().state.images = images,
            // The last list stands, as in the kubelet's image cache.
            Some(Err(error)) => tracing::warn!(%error, "listing the runtime's images failed"),
            None => {}
        }
        self.send_health();
    }

    /// Sends the current health: after every probe (so once a period) and on every tick while a
    /// probe hangs, so NodeStatus always has fresh news to judge staleness by.
    fn send_health(&mut self) {
        let state = self.store().state.clone();
        let health = RuntimeHealth {
            last_successful_probe: state.last_successful_probe,
            runtime_error: state.runtime_error,
            network_error: state.network_error,
            runtime_version: state.runtime_version,
            observed_at: (self.wall_clock)(),
            simulated: self.runtime.is_none(),
            images: state.images,
            capabilities: state.capabilities,
        };
        let changed = self.last_sent.as_ref().is_none_or(|last| {
            (
                &last.runtime_error,
                &last.network_error,
                &last.runtime_version,
            ) != (
                &health.runtime_error,
                &health.network_error,
                &health.runtime_version,
            )
        });
        if changed {
            tracing::info!(runtime_error = ?health.runtime_error, network_error = ?health.network_error, "runtime health changed");
        }
        match self.health.try_send(health.clone()) {
            Ok(()) => self.last_sent = Some(health),
            // The next probe or tick sends the whole picture again.
            Err(error) => {
                tracing::warn!(%error, "RuntimeHealth not delivered; sent again next period");
            }
        }
    }
}

async fn bounded<T>(
    timeout: Duration,
    method: &'static str,
    call: futures::future::BoxFuture<'static, RuntimeResult<T>>,
) -> RuntimeResult<T> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or(Err(RuntimeError::Timeout { method, timeout }))
}

impl Actor for RuntimeProbeActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Probe once at once (the kubelet runs updateRuntimeUp before its first status sync).
        self.start_probe(ctx);
        if self.runtime.is_some() {
            ctx.run_interval(self.settings.probe_period, Self::tick);
        } else {
            self.resend_until_delivered(ctx);
        }
    }
}

impl Handler<UpdatePodCidr> for RuntimeProbeActor {
    type Result = bool;

    fn handle(&mut self, UpdatePodCidr(cidr): UpdatePodCidr, ctx: &mut Context<Self>) -> bool {
        if self.store().pod_cidr.as_deref() == Some(cidr.as_str()) {
            return false;
        }
        let Some(runtime) = self.runtime.clone() else {
            self.store().pod_cidr = Some(cidr);
            return true;
        };
        let timeout = self.settings.request_timeout;
        let push = bounded(
            timeout,
            "UpdateRuntimeConfig",
            runtime.update_pod_cidr(cidr.clone()),
        );
        ctx.spawn(
            push.into_actor(self)
                .map(move |result, actor, _| match result {
                    Ok(()) => actor.store().pod_cidr = Some(cidr),
                    // As the kubelet: reported as changed anyway, and tried again on the next change.
                    Err(error) => {
                        tracing::warn!(%error, %cidr, "pushing the pod CIDR to the runtime failed")
                    }
                }),
        );
        true
    }
}

impl SupervisedActor for RuntimeProbeActor {
    fn debug_state(&self) -> serde_json::Value {
        let store = self.store();
        let state = &store.state;
        json!({
            "simulated": self.runtime.is_none(),
            "probes": self.probes,
            "probeInProgressSeconds": self.probe_started.map(|started| started.elapsed().as_secs_f64()),
            "failuresInARow": self.failures_in_a_row,
            "lastFailure": self.last_failure.as_ref().map(|(at, error)| json!({"at": at.to_string(), "error": error})),
            "lastSuccessfulProbeSecondsAgo": state.last_successful_probe.map(|at| Instant::now().saturating_duration_since(at).as_secs_f64()),
            "runtimeError": state.runtime_error,
            "networkError": state.network_error,
            "runtimeVersion": state.runtime_version,
            "podCIDR": store.pod_cidr,
            "runtimeHandlers": state.capabilities.handlers.iter().map(|handler| json!({
                "name": handler.name,
                "recursiveReadOnlyMounts": handler.supports_recursive_read_only_mounts,
                "userNamespaces": handler.supports_user_namespaces,
            })).collect::<Vec<_>>(),
            "supplementalGroupsPolicy": state.capabilities.features.map(|f| f.supplemental_groups_policy),
        })
    }
}
