//! One probe worker's memory and the kubelet's rules for it, pure (§5.1, §5.2): what a tick
//! does, how an outcome moves the consecutive counts, when a result is published (only at a
//! threshold and only on change), which events it asks for, and when the worker holds.

use std::time::Duration;

use tokio::time::Instant;

use super::spec::{ProbeKind, ProbeSettings};
use crate::ports::ProbeOutcome;

/// A published probe result (the kubelet's `results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure,
}

/// What one worker remembers; kept outside the prober so a restart loses none of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerMemory {
    /// The container these results belong to; a new ID resets them.
    pub container_id: String,
    /// The result last published (`None`: startup's initial Unknown).
    pub published: Option<ProbeResult>,
    /// The last probe's own result, before thresholds.
    pub last_result: Option<ProbeResult>,
    pub consecutive_successes: u32,
    pub consecutive_failures: u32,
    /// After a liveness Failure or any startup result: no more probes for this container.
    pub held: bool,
    pub next_run: Option<Instant>,
    /// The probes run so far by this worker, for `/metrics/probes`; a new container keeps
    /// counting, as the kubelet's worker does.
    pub totals: ProbeTotals,
}

/// The kubelet's `prober_probe_total` of one worker: probes by result. A probe that errored
/// (`Unknown`) is not counted, as the kubelet throws its result away before counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeTotals {
    pub successful: u64,
    pub failed: u64,
}

impl WorkerMemory {
    /// The initial results (§5.1): readiness Failure, liveness Success, startup Unknown.
    pub fn new(kind: ProbeKind, container_id: &str) -> Self {
        Self {
            container_id: container_id.to_owned(),
            published: match kind {
                ProbeKind::Readiness => Some(ProbeResult::Failure),
                ProbeKind::Liveness => Some(ProbeResult::Success),
                ProbeKind::Startup => None,
            },
            last_result: None,
            consecutive_successes: 0,
            consecutive_failures: 0,
            held: false,
            next_run: None,
            totals: ProbeTotals::default(),
        }
    }
}

/// A container's `ready` and `started` as the API's status last reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reported {
    pub ready: bool,
    pub started: bool,
}

impl WorkerMemory {
    /// The initial results kept where the API already reports better (§5.5, the kubelet's
    /// restart behaviour): a started container stays started (its startup worker holds), a
    /// ready one stays ready until its readiness probe fails past the threshold.
    pub fn resumed(mut self, kind: ProbeKind, reported: Reported) -> Self {
        match kind {
            ProbeKind::Readiness if reported.ready => self.published = Some(ProbeResult::Success),
            ProbeKind::Startup if reported.started => {
                self.published = Some(ProbeResult::Success);
                self.held = true;
            }
            _ => {}
        }
        self
    }
}

/// An event the worker asks to be recorded on the pod (Warning type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeEvent {
    pub reason: &'static str,
    pub message: String,
}

/// What recording one outcome led to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recorded {
    pub event: Option<ProbeEvent>,
    /// A newly published result.
    pub published: Option<ProbeResult>,
}

/// Why a tick runs no probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    Held,
    /// Within `initialDelaySeconds` of the container's start.
    InitialDelay,
    /// Liveness/readiness before the container has started (startup not yet Success).
    NotStarted,
    /// The startup probe after the container has started.
    AlreadyStarted,
}

/// Whether a tick at `now` probes (§5.1, §5.4).
pub fn should_probe(
    kind: ProbeKind,
    memory: &WorkerMemory,
    settings: &ProbeSettings,
    container_started_at: Instant,
    started: bool,
    now: Instant,
) -> Result<(), Skip> {
    if memory.held {
        return Err(Skip::Held);
    }
    match (kind, started) {
        (ProbeKind::Startup, true) => return Err(Skip::AlreadyStarted),
        (ProbeKind::Readiness | ProbeKind::Liveness, false) => return Err(Skip::NotStarted),
        _ => {}
    }
    if now.saturating_duration_since(container_started_at) < settings.initial_delay {
        return Err(Skip::InitialDelay);
    }
    Ok(())
}

/// Records one probe's outcome (after the runner's retries) and applies the thresholds.
pub fn record(
    kind: ProbeKind,
    memory: &mut WorkerMemory,
    settings: &ProbeSettings,
    outcome: &ProbeOutcome,
) -> Recorded {
    let title = kind.title();
    let (result, event) = match outcome {
        ProbeOutcome::Success(_) => (ProbeResult::Success, None),
        ProbeOutcome::Warning(text) => (
            ProbeResult::Success,
            Some(event(
                "ProbeWarning",
                format!("{title} probe warning: {text}"),
            )),
        ),
        ProbeOutcome::Failure(text) => (
            ProbeResult::Failure,
            Some(event("Unhealthy", format!("{title} probe failed: {text}"))),
        ),
        ProbeOutcome::Unknown(error) => (
            ProbeResult::Failure,
            Some(event(
                "Unhealthy",
                format!("{title} probe errored and resulted in Failure state: {error}"),
            )),
        ),
    };
    memory.last_result = Some(result);
    let totals = &mut memory.totals;
    match outcome {
        ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => {
            totals.successful = totals.successful.saturating_add(1);
        }
        ProbeOutcome::Failure(_) => totals.failed = totals.failed.saturating_add(1),
        ProbeOutcome::Unknown(_) => {}
    }
    let reached = match result {
        ProbeResult::Success => {
            memory.consecutive_failures = 0;
            memory.consecutive_successes = memory.consecutive_successes.saturating_add(1);
            memory.consecutive_successes >= settings.success_threshold
        }
        ProbeResult::Failure => {
            memory.consecutive_successes = 0;
            memory.consecutive_failures = memory.consecutive_failures.saturating_add(1);
            memory.consecutive_failures >= settings.failure_threshold
        }
    };
    let mut recorded = Recorded {
        event,
        published: None,
    };
    if reached && memory.published != Some(result) {
        memory.published = Some(result);
        recorded.published = Some(result);
    }
    // The kubelet stops probing until the container is replaced: a liveness failure kills it,
    // and a startup result is final for this container.
    if reached
        && (kind == ProbeKind::Startup
            || (kind == ProbeKind::Liveness && result == ProbeResult::Failure))
    {
        memory.held = true;
    }
    recorded
}

fn event(reason: &'static str, message: String) -> ProbeEvent {
    ProbeEvent { reason, message }
}

/// The first probe's delay: U[0, period) only while the prober has been up for less than one
/// period (so a prober restart does not probe everything at once), else none.
pub fn first_delay(period: Duration, prober_up_for: Duration, unit_random: f64) -> Duration {
    if prober_up_for >= period {
        return Duration::ZERO;
    }
    period
        .mul_f64(unit_random.clamp(0.0, 1.0))
        .min(period.saturating_sub(Duration::from_nanos(1)))
}
