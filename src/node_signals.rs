//! The node's two signal actors, RuntimeProbe and EvictionSignal, wired to the real CRI and
//! host adapters (or to a simulated runtime) and added to the node's supervisor. Their state
//! lives in stores created here, so it outlives every instance the supervisor starts.

use std::sync::Arc;

use nodepulse_actors::{
    eviction::{
        EvictionSettings, EvictionSignalActor, Evictions, PressureState, ThresholdConfig,
        parse_thresholds,
    },
    messages::{PressureChanged, RuntimeHealth},
    ports::{
        HostSignals, ImageFsUsage, RuntimeError, RuntimeResult, RuntimeService, RuntimeStatus,
        RuntimeVersion,
    },
    runtime_probe::{ProbeStore, RuntimeProbeActor, RuntimeProbeSettings},
};
use nodepulse_supervisor::{ChildSpec, Kept, Mailbox, Recipient, SupervisorBuilder, mailbox};

use crate::{
    cli::Settings,
    config::{Config, RuntimeKind},
    cri::CriClient,
    host::HostProbe,
};

/// Adds RuntimeProbeActor (`runtime-probe`) and EvictionSignalActor (`eviction-signal`),
/// reporting to `runtime_health` and `pressure`.
pub fn signal_actors(
    builder: SupervisorBuilder,
    settings: &Settings,
    runtime_health: Recipient<RuntimeHealth>,
    pressure: Recipient<PressureChanged>,
) -> SupervisorBuilder {
    let config = &settings.config;
    let host: Arc<dyn HostSignals> = Arc::new(HostProbe::configured(config));
    signal_actors_with(
        builder,
        config,
        runtime(config),
        host,
        runtime_health,
        pressure,
        None,
    )
    .0
}

/// The runtime `config` names: a CRI client, or `None` for a simulated one. Validation has
/// checked the endpoint; should it still not parse, the runtime is reported unreachable (the
/// node stays NotReady and says why) — never pretended healthy.
pub fn runtime(config: &Config) -> Option<Arc<dyn RuntimeService>> {
    match config.runtime {
        RuntimeKind::Simulated => None,
        RuntimeKind::Cri => match CriClient::new(
            &config.container_runtime_endpoint,
            config.runtime_request_timeout.0,
        ) {
            Ok(client) => Some(Arc::new(client)),
            Err(error) => {
                tracing::error!(%error, "no usable containerRuntimeEndpoint; the runtime is reported unreachable");
                Some(Arc::new(UnusableEndpoint(error.to_string())))
            }
        },
    }
}

/// A runtime behind an endpoint that cannot be used: every call fails, saying why.
struct UnusableEndpoint(String);

impl UnusableEndpoint {
    fn fail<T: Send + 'static>(&self) -> futures::future::BoxFuture<'static, RuntimeResult<T>> {
        let error = RuntimeError::Unreachable {
            path: std::path::PathBuf::new(),
            message: self.0.clone(),
        };
        Box::pin(async move { Err(error) })
    }
}

impl RuntimeService for UnusableEndpoint {
    fn status(&self) -> futures::future::BoxFuture<'static, RuntimeResult<RuntimeStatus>> {
        self.fail()
    }

    fn version(&self) -> futures::future::BoxFuture<'static, RuntimeResult<RuntimeVersion>> {
        self.fail()
    }

    fn image_fs_info(
        &self,
    ) -> futures::future::BoxFuture<'static, RuntimeResult<Vec<ImageFsUsage>>> {
        self.fail()
    }

    fn update_pod_cidr(
        &self,
        _pod_cidr: String,
    ) -> futures::future::BoxFuture<'static, RuntimeResult<()>> {
        self.fail()
    }
}

/// [`signal_actors`] with the adapters given (tests pass fixture trees and private runtimes),
/// also returning RuntimeProbeActor's address: NodeStatus sends it
/// [`UpdatePodCidr`](nodepulse_actors::runtime_probe::UpdatePodCidr) when `spec.podCIDRs` changes.
/// With `evictions`, EvictionSignal evicts from those pods when a threshold is eligible.
pub fn signal_actors_with(
    builder: SupervisorBuilder,
    config: &Config,
    runtime: Option<Arc<dyn RuntimeService>>,
    host: Arc<dyn HostSignals>,
    runtime_health: Recipient<RuntimeHealth>,
    pressure: Recipient<PressureChanged>,
    evictions: Option<Evictions>,
) -> (SupervisorBuilder, Mailbox<RuntimeProbeActor>) {
    let capacity = config.supervision.mailbox_capacity;
    let probe_settings = RuntimeProbeSettings {
        probe_period: config.runtime_probe_period.0,
        request_timeout: config.runtime_request_timeout.0,
    };
    let probe_store = Kept::<ProbeStore>::default();
    let probe_runtime = runtime.clone();
    let (probe_address, probe_inbox) = mailbox(capacity);
    let builder = builder.child(ChildSpec::new("runtime-probe", probe_inbox, move || {
        RuntimeProbeActor::new(
            probe_settings.clone(),
            probe_runtime.clone(),
            runtime_health.clone(),
            probe_store.clone(),
        )
    }));

    let eviction_settings = eviction_settings(config);
    let pressure_state = Kept::<PressureState>::default();
    let (_eviction_address, eviction_inbox) = mailbox(capacity);
    let builder = builder.child(ChildSpec::new(
        "eviction-signal",
        eviction_inbox,
        move || {
            let actor = EvictionSignalActor::new(
                eviction_settings.clone(),
                Arc::clone(&host),
                runtime.clone(),
                pressure.clone(),
                pressure_state.clone(),
            );
            match &evictions {
                Some(evictions) => actor.with_evictions(evictions.clone()),
                None => actor,
            }
        },
    ));
    (builder, probe_address)
}

/// The eviction settings of a validated configuration.
pub fn eviction_settings(config: &Config) -> EvictionSettings {
    let grace = config
        .eviction_soft_grace_period
        .iter()
        .map(|(signal, duration)| (signal.clone(), duration.0))
        .collect();
    let thresholds = parse_thresholds(
        &ThresholdConfig {
            hard: &config.eviction_hard,
            soft: &config.eviction_soft,
            soft_grace_period: &grace,
            minimum_reclaim: &config.eviction_minimum_reclaim,
        },
        true,
    )
    .unwrap_or_else(|error| {
        // Validation refused this before anything started; reaching here is a bug, not input.
        tracing::error!(%error, "eviction thresholds invalid after validation; none applied");
        Vec::new()
    });
    EvictionSettings {
        thresholds,
        housekeeping_interval: config.housekeeping_interval.0,
        pressure_transition_period: config.eviction_pressure_transition_period.0,
        runtime_request_timeout: config.runtime_request_timeout.0,
    }
}
