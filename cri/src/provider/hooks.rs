//! The kubelet's lifecycle handlers (`lifecycle/handlers.go`) for `postStart` and `preStop`:
//! `exec` through ExecSync with no timeout of its own, `httpGet` as the same request the
//! prober sends (through the [`ProbeRunner`] port), failing only when no answer came — the
//! kubelet ignores the status code — and `sleep`, with the kubelet's failure messages. Callers
//! bound the time.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{Container, HTTPGetAction, LifecycleHandler, Pod},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::{engine::Engine, view::pod_label};
use nodepulse_actors::ports::{HTTP_STATUS_FAILURE, ProbeAction, ProbeOutcome, ProbeTarget};

/// `User-Agent` of the kubelet's hook requests (`kube-lifecycle/<major>.<minor>`).
pub const LIFECYCLE_USER_AGENT: &str = "kube-lifecycle/1.36";
/// The kubelet's events for a failed hook; the message never carries the hook's output.
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
/// The waiting reason of a container whose postStart hook failed.
pub const POST_START_HOOK_ERROR: &str = "PostStartHookError";

/// Why a hook failed, in the kubelet's words (`lifecycle/handlers.go`). Whether it is run
/// again is the caller's rule (a failed postStart kills the container; preStop goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// ExecSync failed, or the command exited non-zero; `output` is what it printed.
    #[error(
        "Exec lifecycle hook ([{command}]) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {output:?}"
    )]
    Exec {
        command: String,
        container: String,
        pod: String,
        error: String,
        output: String,
    },
    #[error(
        "HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {error}"
    )]
    Http {
        path: String,
        container: String,
        pod: String,
        #[source]
        error: HttpHookError,
    },
    #[error("Cannot run handler: invalid handler: neither exec, httpGet nor sleep")]
    NoHandler,
    /// The container went (or the pod is torn down) while its postStart hook ran (Go's
    /// `context.Canceled`, as the kubelet's cancelled sync context gives it).
    #[error("context canceled")]
    Cancelled,
}

/// Why an `httpGet` hook got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpHookError {
    #[error("couldn't find port: {port} in {container}")]
    NoSuchPort { port: String, container: String },
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("failed to find networking container")]
    NoPodIp,
    #[error("no HTTP client for lifecycle hooks")]
    NoClient,
    /// The request failed; the prober's text.
    #[error("{0}")]
    NoAnswer(String),
}

/// The port a hook's `httpGet` names: a number, a numeric string, or one of the container's
/// named ports; an empty name is 80, as the kubelet has it.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, HttpHookError> {
    let number = match port {
        IntOrString::Int(number) => i64::from(*number),
        IntOrString::String(name) if name.is_empty() => 80,
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(number) => number,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| HttpHookError::NoSuchPort {
                    port: name.clone(),
                    container: container.name.clone(),
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or(HttpHookError::InvalidPort(number))
}

/// The request an `httpGet` hook sends: to its `host`, else the pod's first IP.
pub fn http_action(
    action: &HTTPGetAction,
    container: &Container,
    pod_ips: &[String],
) -> Result<ProbeAction, HttpHookError> {
    let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
        Some(host) => host.to_owned(),
        None => pod_ips.first().cloned().ok_or(HttpHookError::NoPodIp)?,
    };
    let mut headers: Vec<(String, String)> = action
        .http_headers
        .iter()
        .flatten()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("user-agent"))
    {
        headers.push(("User-Agent".to_owned(), LIFECYCLE_USER_AGENT.to_owned()));
    }
    Ok(ProbeAction::HttpGet {
        scheme: action
            .scheme
            .as_deref()
            .unwrap_or("http")
            .to_ascii_lowercase(),
        host,
        port: resolve_port(&action.port, container)?,
        path: action.path.clone().unwrap_or_default(),
        headers,
    })
}

/// Whether an HTTP exchange counts as a hook success: any answer does.
pub fn http_answered(outcome: &ProbeOutcome) -> Result<(), HttpHookError> {
    match outcome {
        ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => Ok(()),
        ProbeOutcome::Failure(text) if text.starts_with(HTTP_STATUS_FAILURE) => Ok(()),
        ProbeOutcome::Failure(text) => Err(HttpHookError::NoAnswer(text.clone())),
        ProbeOutcome::Unknown(error) => Err(HttpHookError::NoAnswer(error.to_string())),
    }
}

/// The error CRI's ExecSync gives for a command that exited non-zero.
pub fn exec_error(command: &[String], exit_code: i32, stderr: &[u8]) -> String {
    format!(
        "command '{}' exited with {exit_code}: {}",
        command.join(" "),
        String::from_utf8_lossy(stderr)
    )
}

impl Engine {
    /// Runs `handler` for `container` (runtime id `id`) of `pod`; the kubelet's message when it
    /// failed. HTTP requests get `timeout`; exec runs until it ends (the caller bounds both).
    pub(super) async fn run_hook(
        &self,
        pod: &Pod,
        container: &Container,
        id: &str,
        handler: &LifecycleHandler,
        timeout: Duration,
    ) -> Result<(), HookError> {
        let pod_name = pod_label(pod);
        if let Some(command) = handler.exec.as_ref().and_then(|e| e.command.clone()) {
            let result = self
                .runtime
                .exec_sync(id.to_owned(), command.clone(), Duration::ZERO)
                .await;
            let (error, output) = match result {
                Ok(output) if output.exit_code == 0 => return Ok(()),
                Ok(output) => {
                    let error = exec_error(&command, output.exit_code, &output.stderr);
                    let mut text = output.stdout;
                    text.extend_from_slice(&output.stderr);
                    (error, String::from_utf8_lossy(&text).into_owned())
                }
                Err(error) => (error.to_string(), String::new()),
            };
            return Err(HookError::Exec {
                command: command.join(" "),
                container: container.name.clone(),
                pod: pod_name,
                error,
                output,
            });
        }
        if let Some(action) = &handler.http_get {
            let path = action.path.clone().unwrap_or_default();
            let fail = |error: HttpHookError| HookError::Http {
                path: path.clone(),
                container: container.name.clone(),
                pod: pod_name.clone(),
                error,
            };
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let pod_ips = self.pod_ips(uid);
            let action = http_action(action, container, &pod_ips).map_err(fail)?;
            let Some(runner) = self.http_hooks.clone() else {
                return Err(fail(HttpHookError::NoClient));
            };
            let outcome = runner
                .run(ProbeTarget {
                    container_id: id.to_owned(),
                    action,
                    timeout,
                })
                .await;
            return http_answered(&outcome).map_err(fail);
        }
        if let Some(sleep) = &handler.sleep {
            let seconds = u64::try_from(sleep.seconds).unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            return Ok(());
        }
        Err(HookError::NoHandler)
    }
}
