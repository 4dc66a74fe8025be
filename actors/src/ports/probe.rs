//! The prober's one I/O port: run a single probe (exec, httpGet, tcpSocket, grpc) against a
//! container and say what happened, in the kubelet's words. The daemon implements it in
//! `src/probe_handlers/`; the prober's tests use a scripted fake. It never retries: the worker does.

use std::time::Duration;

use futures::future::BoxFuture;

/// What a probe does, with ports already resolved from the container's named ports and the
/// exec command already `$(VAR)`-expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    Exec {
        command: Vec<String>,
    },
    HttpGet {
        /// Lower-cased `http` or `https`.
        scheme: String,
        /// `host` from the spec, else the pod IP.
        host: String,
        port: u16,
        path: String,
        /// Spec headers in order; the runner adds `User-Agent` and `Accept` unless given.
        headers: Vec<(String, String)>,
    },
    TcpSocket {
        host: String,
        port: u16,
    },
    Grpc {
        host: String,
        port: u16,
        service: Option<String>,
    },
}

/// One probe to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// `containerStatuses[].containerID`, e.g. `containerd://…` (exec strips the scheme).
    pub container_id: String,
    pub action: ProbeAction,
    /// `timeoutSeconds`.
    pub timeout: Duration,
}

/// What one probe run found (the kubelet's `probe.Result` with its output text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    Success(String),
    /// Counted as a success, with a `ProbeWarning` event (an HTTP redirect to another host).
    Warning(String),
    Failure(String),
    /// The probe could not be run (a runtime error): retried within the tick, then a failure.
    Unknown(ProbeError),
}

/// How an httpGet probe's failure text for an answer outside 200–399 starts (the status code
/// follows): the server did answer, which is all a lifecycle hook asks of it.
pub const HTTP_STATUS_FAILURE: &str = "HTTP probe failed with statuscode: ";

/// Why a probe could not be run at all; retrying may help (the kubelet retries 3 times).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// ExecSync failed for a reason other than the command's timeout.
    #[error("exec: {0}")]
    Exec(String),
    /// The probe's spec cannot be run (e.g. an unsupported scheme).
    #[error("{0}")]
    Invalid(String),
}

/// Runs probes. Each call is bounded by the target's timeout.
pub trait ProbeRunner: Send + Sync + 'static {
    fn run(&self, target: ProbeTarget) -> BoxFuture<'static, ProbeOutcome>;
}
