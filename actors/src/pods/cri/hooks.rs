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

use super::{engine::Engine, worker::pod_label};
use crate::ports::{HTTP_STATUS_FAILURE, ProbeAction, ProbeOutcome, ProbeTarget};

/// `User-Agent` of the kubelet's hook requests (`kube-lifecycle/<major>.<minor>`).
pub const LIFECYCLE_USER_AGENT: &str = "kube-lifecycle/1.36";
/// The kubelet's events for a failed hook; the message never carries the hook's output.
pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
/// The waiting reason of a container whose postStart hook failed.
pub const POST_START_HOOK_ERROR: &str = "PostStartHookError";

/// The port a hook's `httpGet` names: a number, a numeric string, or one of the container's
/// named ports; an empty name is 80, as the kubelet has it.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
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
                .ok_or_else(|| format!("couldn't find port: {name} in {}", container.name))?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid port number: {number}"))
}

/// The request an `httpGet` hook sends: to its `host`, else the pod's first IP.
pub fn http_action(
    action: &HTTPGetAction,
    container: &Container,
    pod_ips: &[String],
) -> Result<ProbeAction, String> {
    let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
        Some(host) => host.to_owned(),
        None => pod_ips
            .first()
            .cloned()
            .ok_or_else(|| "failed to find networking container".to_owned())?,
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
pub fn http_answered(outcome: &ProbeOutcome) -> Result<(), String> {
    match outcome {
        ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => Ok(()),
        ProbeOutcome::Failure(text) if text.starts_with(HTTP_STATUS_FAILURE) => Ok(()),
        ProbeOutcome::Failure(text) => Err(text.clone()),
        ProbeOutcome::Unknown(error) => Err(error.to_string()),
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
    ) -> Result<(), String> {
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
            return Err(format!(
                "Exec lifecycle hook ([{}]) for Container {:?} in Pod {pod_name:?} failed - error: {error}, message: {output:?}",
                command.join(" "),
                container.name
            ));
        }
        if let Some(action) = &handler.http_get {
            let path = action.path.clone().unwrap_or_default();
            let fail = |error: String| {
                format!(
                    "HTTP lifecycle hook ({path}) for Container {:?} in Pod {pod_name:?} failed - error: {error}",
                    container.name
                )
            };
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let pod_ips = self
                .core()
                .pods
                .get(uid)
                .map(|entry| entry.pod_ips.clone())
                .unwrap_or_default();
            let action = http_action(action, container, &pod_ips).map_err(fail)?;
            let Some(runner) = self.http_hooks.clone() else {
                return Err(fail("no HTTP client for lifecycle hooks".to_owned()));
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
        let error = "invalid handler: neither exec, httpGet nor sleep";
        Err(format!("Cannot run handler: {error}"))
    }
}
