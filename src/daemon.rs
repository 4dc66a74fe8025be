//! The daemon's one run: start the node's supervisor and the debug endpoint, then wait for a
//! shutdown signal or an escalation, stop everything and say how it ended.

use std::{future::Future, net::SocketAddr, time::Duration};

use nodepulse_supervisor::{Escalation, Supervisor, SupervisorBuilder, SupervisorConfig};

use crate::{cli::Settings, config::Config, debug, kube_api::KubeApi, node, standalone};

/// Exit code for a configuration or command-line error (clap uses 2 for usage errors too).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code when a supervisor escalated, so the service manager restarts the daemon.
pub const EXIT_ESCALATED: u8 = 3;
/// Exit code when the daemon could not run (for example, the debug address is taken).
pub const EXIT_FAILED: u8 = 1;

/// How long the actors get to finish their work at shutdown.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// Asked to stop, and stopped.
    Stopped,
    Escalated(Escalation),
    Failed(String),
}

impl Outcome {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Stopped => 0,
            Self::Escalated(_) => EXIT_ESCALATED,
            Self::Failed(_) => EXIT_FAILED,
        }
    }

    /// The line printed to stderr as the process exits; none for a clean stop.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Stopped => None,
            Self::Escalated(escalation) => {
                Some(format!("nodepulse: supervisor escalated: {escalation}"))
            }
            Self::Failed(reason) => Some(format!("nodepulse: {reason}")),
        }
    }
}

/// Prints how the run ended (nothing for a clean stop) and returns the process exit code.
pub fn report(outcome: &Outcome) -> u8 {
    if let Some(message) = outcome.message() {
        eprintln!("{message}");
    }
    outcome.exit_code()
}

/// The supervisor settings the configuration describes.
pub fn supervisor_config(config: &Config, node: &str) -> SupervisorConfig {
    let supervision = &config.supervision;
    let mut supervisor = SupervisorConfig::new(node);
    supervisor.backoff = nodepulse_supervisor::BackoffPolicy {
        initial: supervision.backoff.initial.into(),
        max: supervision.backoff.max.into(),
        multiplier: supervision.backoff.multiplier,
        jitter: supervision.backoff.jitter,
        reset_after: supervision.backoff.reset_after.into(),
    };
    supervisor.intensity = nodepulse_supervisor::IntensityPolicy {
        max_restarts: supervision.max_restarts(),
        window: supervision.restart_window.into(),
    };
    supervisor.liveness_timeout = supervision.liveness_timeout.into();
    supervisor.liveness_interval = supervision.liveness_interval.into();
    supervisor
}

/// Runs a supervisor with `children` and the debug endpoint until `shutdown` resolves or the
/// supervisor escalates. Must run inside an actix `System`.
pub async fn run(
    settings: &Settings,
    children: impl FnOnce(SupervisorBuilder) -> SupervisorBuilder,
    shutdown: impl Future<Output = ()>,
) -> Outcome {
    let config = &settings.config;
    let Ok(debug_address) = config.debug.address.parse::<SocketAddr>() else {
        return Outcome::Failed(format!(
            "debug.address {:?} is not an address",
            config.debug.address
        ));
    };
    let supervisor = children(Supervisor::builder(supervisor_config(
        config,
        &settings.node_name,
    )))
    .start();
    let gate = debug::FaultInjectionGate::new(
        config.debug.fault_injection.enabled,
        config.debug.fault_injection.token.clone(),
    );
    let endpoint = match debug::start(debug_address, vec![supervisor.clone()], gate) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            supervisor.shutdown(SHUTDOWN_DEADLINE).await;
            return Outcome::Failed(format!(
                "cannot serve the debug endpoint on {debug_address}: {error}"
            ));
        }
    };
    let debug_server = endpoint.server.handle();
    let debug_address = endpoint.address;
    actix_rt::spawn(endpoint.server);
    tracing::info!(node = %settings.node_name, debug = %debug_address, "nodepulse is running");

    let outcome = tokio::select! {
        () = shutdown => Outcome::Stopped,
        escalation = supervisor.escalated() => Outcome::Escalated(escalation),
    };
    if matches!(outcome, Outcome::Stopped) {
        tracing::info!("shutting down");
    }
    if !supervisor.shutdown(SHUTDOWN_DEADLINE).await {
        tracing::warn!(deadline = ?SHUTDOWN_DEADLINE, "some actors did not stop before the deadline");
    }
    debug_server.stop(true).await;
    outcome
}

/// The node agent: the standalone API server when asked for, the API clients, and the node's
/// actors under their supervisor until `shutdown` or an escalation.
pub async fn run_node(mut settings: Settings, shutdown: impl Future<Output = ()>) -> Outcome {
    let standalone = if settings.standalone {
        match standalone::start(&settings.config.standalone).await {
            Ok(standalone) => {
                settings.kubeconfig = Some(standalone.kubeconfig.clone());
                Some(standalone)
            }
            Err(reason) => return Outcome::Failed(reason),
        }
    } else {
        None
    };
    let outcome = match KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config).await {
        Ok(api) if crate::fleet::is_fleet(&settings.config) => {
            crate::fleet::run(&settings, api, shutdown).await
        }
        Ok(api) => {
            run(
                &settings,
                |builder| node::actors(builder, &settings, &api).0,
                shutdown,
            )
            .await
        }
        Err(error) => Outcome::Failed(error.to_string()),
    };
    if let Some(standalone) = standalone {
        standalone.emulator.shutdown().await;
    }
    outcome
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the daemon");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
