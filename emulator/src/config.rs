//! The emulator's configuration: where it listens, the node-lifecycle controller's periods,
//! authentication, and watch tuning. Plain data with kube-controller-manager's defaults.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything [`crate::Emulator::start`] needs.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Where to listen; port 0 picks a free port (see [`crate::EmulatorHandle::base_url`]).
    pub address: SocketAddr,
    pub lifecycle: LifecycleConfig,
    /// kube-controller-manager's other writers of Nodes, on whatever `lifecycle` says: the
    /// taint manager (condition taints, so `not-ready` goes once a Node is Ready) and the TTL
    /// controller (`node.alpha.kubernetes.io/ttl`). On by default, in tests too, so a test that
    /// assumes nobody else writes Nodes fails here as it would on a real cluster.
    pub node_controllers: bool,
    /// kube-controller-manager's attach/detach controller for CSI volumes, and the drivers'
    /// external attachers.
    pub attach_detach: AttachDetachConfig,
    pub auth: AuthConfig,
    pub watch: WatchConfig,
    /// HTTP worker threads.
    pub workers: usize,
    /// Which Node address `pods/log` dials, in order (kube-apiserver's
    /// `--kubelet-preferred-address-types`).
    pub kubelet_preferred_address_types: Vec<String>,
    /// Whether loopback is dialed last when none of a Node's addresses can be: for a node in
    /// the same process (`nodepulse --standalone`), whose name nothing may resolve and whose
    /// kubelet API serves on loopback. kube-apiserver has no such fallback.
    pub kubelet_loopback_fallback: bool,
    /// Serve HTTPS with the emulator's CA: client certificates (x509 authentication) then
    /// work, as nodes that joined by TLS bootstrap present them. Plain HTTP when off.
    pub tls: bool,
    /// kube-controller-manager's `--cluster-signing-duration`: the longest certificate the CSR
    /// signer issues (a CSR's `spec.expirationSeconds` may ask for less). Tests shorten it to
    /// see certificates rotate.
    pub cluster_signing_duration: Duration,
    /// Who may have any node's client certificate approved automatically (users and groups
    /// bound to `certificatesigningrequests/nodeclient`): kubeadm's bootstrap token group by
    /// default; a cluster whose nodes bootstrap with a ServiceAccount's token binds that.
    pub node_client_requesters: Vec<String>,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            address: SocketAddr::from(([127, 0, 0, 1], 16443)),
            lifecycle: LifecycleConfig::default(),
            node_controllers: true,
            attach_detach: AttachDetachConfig::default(),
            auth: AuthConfig::default(),
            watch: WatchConfig::default(),
            workers: 2,
            kubelet_preferred_address_types: crate::kubelet_client::DEFAULT_PREFERRED_ADDRESS_TYPES
                .iter()
                .map(|kind| (*kind).to_owned())
                .collect(),
            kubelet_loopback_fallback: false,
            tls: false,
            cluster_signing_duration: Duration::from_secs(365 * 24 * 3600),
            node_client_requesters: vec![
                crate::certificates::controller::KUBEADM_BOOTSTRAP_GROUP.to_owned(),
            ],
        }
    }
}

impl EmulatorConfig {
    /// A configuration for tests: a free loopback port, node health monitoring off (the node
    /// controllers stay on).
    pub fn for_tests() -> Self {
        EmulatorConfig {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            lifecycle: LifecycleConfig {
                enabled: false,
                ..LifecycleConfig::default()
            },
            ..EmulatorConfig::default()
        }
    }
}

/// The attach/detach controller: VolumeAttachments for the attachable CSI volumes of pods on
/// nodes that let the controller attach (`volumes.kubernetes.io/controller-managed-attach-detach`),
/// `status.volumesAttached`, and detach once a volume left `volumesInUse`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachDetachConfig {
    pub enabled: bool,
    /// Whether the emulator also plays every driver's external attacher (for drivers with a
    /// CSIDriver object): it sets `status.attached` once the node's CSINode has the driver.
    /// Off, a test plays the attacher itself, as it must on a real cluster.
    pub attacher: bool,
}

impl Default for AttachDetachConfig {
    fn default() -> Self {
        AttachDetachConfig {
            enabled: true,
            attacher: true,
        }
    }
}

/// The node-lifecycle controller (kube-controller-manager's `--node-monitor-*` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleConfig {
    pub enabled: bool,
    /// `--node-monitor-period`: how often node health is evaluated.
    pub monitor_period: Duration,
    /// `--node-monitor-grace-period`: silence after which a node's conditions become Unknown.
    pub grace_period: Duration,
    /// `--node-startup-grace-period`: the grace for a node that never posted a Ready condition.
    pub startup_grace_period: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            enabled: true,
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(50),
            startup_grace_period: Duration::from_secs(60),
        }
    }
}

/// An authenticated identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    /// The identity a kubelet (or nodepulse) on `node` presents: `system:node:<node>`.
    pub fn node(node: &str) -> Self {
        User {
            name: format!("system:node:{node}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
        }
    }

    /// An ordinary user with full access.
    pub fn admin(name: &str) -> Self {
        User {
            name: name.into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
}

/// Authentication and the node-restriction authorizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// Bearer token → user. A request with an unknown token gets 401.
    pub tokens: HashMap<String, User>,
    /// Whether requests without a token are served (as `system:anonymous`, with full access).
    pub allow_anonymous: bool,
    /// Restrict `system:node:<name>` users to their own Node, Lease and bound pods, as the Node
    /// authorizer and the NodeRestriction admission plugin do.
    pub node_restriction: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            tokens: HashMap::new(),
            allow_anonymous: true,
            node_restriction: false,
        }
    }
}

/// Watch behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchConfig {
    /// How many recent changes are kept for watches resuming from a resourceVersion; older
    /// versions get 410 Expired.
    pub history: usize,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (kube-apiserver: ~1m).
    pub bookmark_interval: Duration,
    /// The timeout of a watch request without `timeoutSeconds`.
    pub default_timeout: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            history: 10_000,
            bookmark_interval: Duration::from_secs(60),
            default_timeout: Duration::from_secs(1800),
        }
    }
}

/// Parses a Go-style duration (`50s`, `1m30s`, `500ms`, `2h`), as kube-controller-manager's
/// flags take them.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?} (expected e.g. 50s, 1m30s, 500ms)");
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        let value: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value * 60),
            "h" => Duration::from_secs(value * 3600),
            _ => return Err(invalid()),
        };
        total += unit;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_style_durations() {
        assert_eq!(parse_duration("50s"), Ok(Duration::from_secs(50)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
