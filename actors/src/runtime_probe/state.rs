//! The kubelet's `runtimeState` as the probe updates it (`updateRuntimeUp`): the runtime and
//! network errors with the kubelet's exact texts, and the time of the last full success. Pure:
//! `now` is an argument, and a failed probe leaves the state as it was (so it ages into
//! "container runtime is down" on the status side).

use tokio::time::Instant;

use crate::ports::{
    ImageInfo, RuntimeCapabilities, RuntimeCondition, RuntimeError, RuntimeStatus, RuntimeVersion,
};

/// The network error before the first answer.
pub const NETWORK_STATE_UNKNOWN: &str = "network state unknown";

/// What the probe knows about the runtime; kept across the actor's restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeState {
    pub last_successful_probe: Option<Instant>,
    pub runtime_error: Option<String>,
    pub network_error: Option<String>,
    pub runtime_version: Option<String>,
    /// The images as last listed successfully (the kubelet's image cache keeps its last list
    /// when a listing fails too); none before the first.
    pub images: Vec<ImageInfo>,
    /// The handlers and features of the last `Status` that found the runtime ready.
    pub capabilities: RuntimeCapabilities,
}

impl Default for RuntimeState {
    fn default() -> Self {
        Self {
            last_successful_probe: None,
            runtime_error: None,
            network_error: Some(NETWORK_STATE_UNKNOWN.to_owned()),
            runtime_version: None,
            images: Vec::new(),
            capabilities: RuntimeCapabilities::default(),
        }
    }
}

/// A condition as Go's `%v` of `*RuntimeCondition` renders it, `<nil>` when absent.
pub fn render_condition(condition: Option<&RuntimeCondition>) -> String {
    match condition {
        Some(condition) => format!(
            "{}={} reason:{} message:{}",
            condition.kind, condition.status, condition.reason, condition.message
        ),
        None => "<nil>".to_owned(),
    }
}

impl RuntimeState {
    /// Applies a `Status` answer at `now`, as the kubelet's updateRuntimeUp does: the network
    /// error from `NetworkReady`, then the runtime error from `RuntimeReady`; only a ready
    /// runtime refreshes `last_successful_probe` and the handlers and features.
    pub fn apply_status(&mut self, status: &RuntimeStatus, now: Instant) {
        let find = |kind: &str| {
            status
                .conditions
                .iter()
                .find(|condition| condition.kind == kind)
        };
        let network = find("NetworkReady");
        self.network_error = match network {
            Some(condition) if condition.status => None,
            other => Some(format!(
                "container runtime network not ready: {}",
                render_condition(other)
            )),
        };
        let runtime = find("RuntimeReady");
        match runtime {
            Some(condition) if condition.status => {
                self.runtime_error = None;
                self.last_successful_probe = Some(now);
                self.capabilities = RuntimeCapabilities {
                    handlers: status.handlers.clone(),
                    features: status.features,
                };
            }
            other => {
                self.runtime_error = Some(format!(
                    "container runtime not ready: {}",
                    render_condition(other)
                ));
            }
        }
    }

    /// Applies a failed `Status` call. The kubelet leaves its state untouched, so staleness
    /// shows; nodepulse adds one thing: before any success, a missing socket is said plainly
    /// instead of "status check may not have completed yet" alone.
    pub fn apply_failure(&mut self, error: &RuntimeError) {
        if self.last_successful_probe.is_none()
            && matches!(error, RuntimeError::SocketMissing { .. })
        {
            self.runtime_error = Some(format!("container runtime not reachable: {error}"));
        }
    }

    /// Records `Version`'s answer as `nodeInfo.containerRuntimeVersion` writes it.
    pub fn apply_version(&mut self, version: &RuntimeVersion) {
        self.runtime_version = Some(format!(
            "{}://{}",
            version.runtime_name, version.runtime_version
        ));
    }

    /// A simulated runtime: always ready, never stale.
    pub fn simulated(now: Instant) -> Self {
        Self {
            last_successful_probe: Some(now),
            runtime_error: None,
            network_error: None,
            runtime_version: Some("simulated://0.0.0".to_owned()),
            images: Vec::new(),
            capabilities: RuntimeCapabilities::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn condition(kind: &str, status: bool, reason: &str, message: &str) -> RuntimeCondition {
        RuntimeCondition {
            kind: kind.to_owned(),
            status,
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }

    /// (conditions, runtime error, network error, refreshes the last success).
    type StatusCase = (Vec<RuntimeCondition>, Option<String>, Option<String>, bool);

    #[test]
    fn status_answers_give_the_kubelets_messages() {
        let cni = "Network plugin returns error: cni plugin not initialized";
        // (conditions, runtime error, network error, refreshes last success)
        let cases: Vec<StatusCase> = vec![
            (
                vec![condition("RuntimeReady", true, "", ""), condition("NetworkReady", true, "", "")],
                None,
                None,
                true,
            ),
            (
                vec![
                    condition("RuntimeReady", true, "", ""),
                    condition("NetworkReady", false, "NetworkPluginNotReady", cni),
                ],
                None,
                Some(format!("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:{cni}")),
                true,
            ),
            (
                vec![condition("RuntimeReady", false, "Broken", "disk gone"), condition("NetworkReady", true, "", "")],
                Some("container runtime not ready: RuntimeReady=false reason:Broken message:disk gone".to_owned()),
                None,
                false,
            ),
            (
                vec![],
                Some("container runtime not ready: <nil>".to_owned()),
                Some("container runtime network not ready: <nil>".to_owned()),
                false,
            ),
        ];
        for (conditions, runtime_error, network_error, refreshed) in cases {
            let mut state = RuntimeState::default();
            let now = Instant::now();
            state.apply_status(
                &RuntimeStatus {
                    conditions: conditions.clone(),
                    ..RuntimeStatus::default()
                },
                now,
            );
            assert_eq!(state.runtime_error, runtime_error, "{conditions:?}");
            assert_eq!(state.network_error, network_error, "{conditions:?}");
            assert_eq!(
                state.last_successful_probe == Some(now),
                refreshed,
                "{conditions:?}"
            );
        }
    }

    #[test]
    fn a_failed_probe_leaves_the_state_to_age() {
        let start = Instant::now();
        let mut state = RuntimeState::default();
        let ready = RuntimeStatus {
            conditions: vec![
                condition("RuntimeReady", true, "", ""),
                condition("NetworkReady", true, "", ""),
            ],
            ..RuntimeStatus::default()
        };
        state.apply_status(&ready, start);
        let before = state.clone();
        for error in [
            RuntimeError::SocketMissing {
                path: "/run/x.sock".into(),
            },
            RuntimeError::Timeout {
                method: "Status",
                timeout: Duration::from_secs(120),
            },
        ] {
            state.apply_failure(&error);
            assert_eq!(state, before, "{error}");
        }
    }

    #[test]
    fn a_missing_socket_before_any_success_is_said_plainly() {
        let mut state = RuntimeState::default();
        state.apply_failure(&RuntimeError::SocketMissing {
            path: "/run/containerd/containerd.sock".into(),
        });
        assert_eq!(
            state.runtime_error.as_deref(),
            Some(
                "container runtime not reachable: no container runtime socket at /run/containerd/containerd.sock"
            )
        );
        assert_eq!(state.network_error.as_deref(), Some(NETWORK_STATE_UNKNOWN));
        assert_eq!(state.last_successful_probe, None);
    }
}
