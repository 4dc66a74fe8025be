//! A container's probe as the worker runs it: the API defaults applied (§5.1), the action's
//! port resolved by number or by the container's port name, and the exec command expanded
//! against the container's literal `env`. Pure; a probe that cannot run is a typed error.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{Container, Probe},
    apimachinery::pkg::util::intstr::IntOrString,
};

use crate::{
    expansion::expand,
    ports::{ProbeAction, ProbeTarget},
};

/// Which of a container's three probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

impl ProbeKind {
    /// The name in the kubelet's event texts (`Liveness probe failed: …`).
    pub fn title(self) -> &'static str {
        match self {
            Self::Startup => "Startup",
            Self::Readiness => "Readiness",
            Self::Liveness => "Liveness",
        }
    }

    /// The probe of `container` of this kind, if it has one.
    pub fn of(self, container: &Container) -> Option<&Probe> {
        match self {
            Self::Startup => container.startup_probe.as_ref(),
            Self::Readiness => container.readiness_probe.as_ref(),
            Self::Liveness => container.liveness_probe.as_ref(),
        }
    }
}

/// A probe the API server would not have accepted, or one nodepulse cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeSpecError {
    #[error("probe has no handler (exec, httpGet, tcpSocket or grpc)")]
    NoHandler,
    #[error("invalid port number: {0}")]
    InvalidPort(String),
}

/// The probe's timing and thresholds with the API defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSettings {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe's own `terminationGracePeriodSeconds`, which overrides the pod's on a kill.
    pub termination_grace_seconds: Option<i64>,
}

impl ProbeSettings {
    pub fn of(probe: &Probe) -> Self {
        let seconds = |value: Option<i32>, default: i32| {
            Duration::from_secs(u64::try_from(value.unwrap_or(default)).unwrap_or(0))
        };
        let count = |value: Option<i32>, default: i32| {
            u32::try_from(value.unwrap_or(default)).unwrap_or(1).max(1)
        };
        Self {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
            termination_grace_seconds: probe.termination_grace_period_seconds,
        }
    }
}

/// The probe as one run of the runner: `pod_ip` is the default host.
pub fn probe_target(
    probe: &Probe,
    container: &Container,
    container_id: &str,
    pod_ip: &str,
) -> Result<ProbeTarget, ProbeSpecError> {
    let host = |given: Option<&String>| {
        given
            .filter(|h| !h.is_empty())
            .cloned()
            .unwrap_or_else(|| pod_ip.to_owned())
    };
    let action = if let Some(exec) = &probe.exec {
        let env = container.env.as_deref().unwrap_or_default();
        let lookup = |name: &str| {
            env.iter()
                .rev()
                .find(|var| var.name == name && var.value_from.is_none())
                .map(|var| var.value.as_deref().unwrap_or_default())
        };
        let command = exec.command.iter().flatten();
        ProbeAction::Exec {
            command: command.map(|arg| expand(arg, lookup)).collect(),
        }
    } else if let Some(http) = &probe.http_get {
        ProbeAction::HttpGet {
            scheme: http.scheme.as_deref().unwrap_or("http").to_lowercase(),
            host: host(http.host.as_ref()),
            port: resolve_port(&http.port, container)?,
            path: http
                .path
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or("/".into()),
            headers: (http.http_headers.iter().flatten())
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        }
    } else if let Some(tcp) = &probe.tcp_socket {
        ProbeAction::TcpSocket {
            host: host(tcp.host.as_ref()),
            port: resolve_port(&tcp.port, container)?,
        }
    } else if let Some(grpc) = &probe.grpc {
        ProbeAction::Grpc {
            host: pod_ip.to_owned(),
            port: valid_port(i64::from(grpc.port))?,
            service: grpc.service.clone(),
        }
    } else {
        return Err(ProbeSpecError::NoHandler);
    };
    Ok(ProbeTarget {
        container_id: container_id.to_owned(),
        action,
        timeout: ProbeSettings::of(probe).timeout,
    })
}

/// A port by number, by the container's port name, else as a numeric string (the kubelet's
/// `findPortByName` then `strconv.Atoi`).
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, ProbeSpecError> {
    match port {
        IntOrString::Int(number) => valid_port(i64::from(*number)),
        IntOrString::String(name) => {
            let named = (container.ports.iter().flatten())
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port));
            match named {
                Some(number) => valid_port(number),
                None => name
                    .parse::<i64>()
                    .map_err(|_| ProbeSpecError::InvalidPort(name.clone()))
                    .and_then(valid_port),
            }
        }
    }
}

fn valid_port(number: i64) -> Result<u16, ProbeSpecError> {
    u16::try_from(number)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| ProbeSpecError::InvalidPort(number.to_string()))
}
