//! `nodepulse status`: the node as the API server has it — each condition's status, reason,
//! message and times, and the Lease's holder and renew time with their age — read with the
//! same kubeconfig resolution as the daemon. A focused `kubectl describe node`; it reads, never
//! writes, and does not need the daemon to be running.

use std::{fmt::Write as _, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::Api;
use nodepulse_actors::ports::NODE_LEASE_NAMESPACE;

use crate::{
    apiserver_client::{ConnectError, KubeconfigSource, client_config, with_causes},
    cli::Cli,
    daemon::{EXIT_CONFIG, EXIT_FAILED},
};

/// How long each read may take before the command gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the node could not be shown. None is retryable by the command itself.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("cannot read {what} from {server}: {reason}")]
    Read {
        what: String,
        server: String,
        /// The error with its causes (a TLS failure is only in the causes).
        reason: String,
    },
    #[error("no Node named {node:?} on {server} (is nodepulse running with this --node-name?)")]
    NoNode { node: String, server: String },
}

/// What the API server has about one node.
pub struct NodeReport {
    pub node: Node,
    pub lease: Option<Lease>,
    pub server: String,
    pub source: KubeconfigSource,
}

pub fn run(cli: &Cli) -> u8 {
    let settings = match cli.settings() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("nodepulse: {error}");
            return EXIT_CONFIG;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("nodepulse: cannot start a runtime: {error}");
            return EXIT_FAILED;
        }
    };
    match runtime.block_on(fetch(settings.kubeconfig.as_deref(), &settings.node_name)) {
        Ok(report) => {
            print!("{}", render(&report, Timestamp::now()));
            0
        }
        Err(error) => {
            eprintln!("nodepulse: {error}");
            EXIT_FAILED
        }
    }
}

/// Reads the Node and its Lease.
pub async fn fetch(
    kubeconfig: Option<&std::path::Path>,
    node: &str,
) -> Result<NodeReport, StatusError> {
    let (mut config, source) = client_config(kubeconfig).await?;
    config.connect_timeout = Some(REQUEST_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(ConnectError::Client)?;
    let read_error = |what: String| {
        let server = server.clone();
        move |error: kube::Error| StatusError::Read {
            what,
            server,
            reason: with_causes(&error),
        }
    };
    let found = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .map_err(read_error(format!("Node {node}")))?;
    let Some(found) = found else {
        return Err(StatusError::NoNode {
            node: node.to_owned(),
            server,
        });
    };
    let lease = Api::<Lease>::namespaced(client, NODE_LEASE_NAMESPACE)
        .get_opt(node)
        .await
        .map_err(read_error(format!("Lease {NODE_LEASE_NAMESPACE}/{node}")))?;
    Ok(NodeReport {
        node: found,
        lease,
        server,
        source,
    })
}

/// The report as text; `now` is when the ages are counted from.
pub fn render(report: &NodeReport, now: Timestamp) -> String {
    let mut out = String::new();
    let name = report.node.metadata.name.as_deref().unwrap_or_default();
    let _ = writeln!(out, "Node:        {name}");
    let _ = writeln!(
        out,
        "Server:      {} (from {})",
        report.server, report.source
    );
    let _ = writeln!(
        out,
        "Lease:       {}",
        lease_line(report.lease.as_ref(), now)
    );
    let conditions = report
        .node
        .status
        .as_ref()
        .and_then(|status| status.conditions.clone())
        .unwrap_or_default();
    if conditions.is_empty() {
        out.push_str("Conditions:  none reported yet\n");
        return out;
    }
    out.push_str("Conditions:\n");
    let time = |time: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        time.map_or_else(|| "-".to_owned(), |time| with_age(time.0, now))
    };
    let mut rows = vec![[
        "Type".to_owned(),
        "Status".to_owned(),
        "LastHeartbeatTime".to_owned(),
        "LastTransitionTime".to_owned(),
        "Reason".to_owned(),
        "Message".to_owned(),
    ]];
    for condition in &conditions {
        rows.push([
            condition.type_.clone(),
            condition.status.clone(),
            time(condition.last_heartbeat_time.as_ref()),
            time(condition.last_transition_time.as_ref()),
            condition.reason.clone().unwrap_or_default(),
            condition.message.clone().unwrap_or_default(),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        out.push_str("  ");
        for (column, width) in widths.iter().enumerate() {
            let _ = write!(out, "{:<width$}  ", row[column]);
        }
        out.push_str(&row[5]);
        out.push('\n');
    }
    out
}

fn lease_line(lease: Option<&Lease>, now: Timestamp) -> String {
    let Some(lease) = lease else {
        return format!("none in {NODE_LEASE_NAMESPACE}: the node is not heartbeating");
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_else(|| "-".to_owned());
    let renewed = spec
        .renew_time
        .map_or_else(|| "never".to_owned(), |time| with_age(time.0, now));
    let duration = spec
        .lease_duration_seconds
        .map_or_else(|| "-".to_owned(), |seconds| format!("{seconds}s"));
    format!("holder {holder}, renewed {renewed}, duration {duration}")
}

/// `2026-11-29T22:41:03Z (2s ago)`.
fn with_age(time: Timestamp, now: Timestamp) -> String {
    let seconds = now.as_second() - time.as_second();
    let age = if seconds >= 0 {
        format!("{} ago", human_duration(seconds.unsigned_abs()))
    } else {
        format!("{} in the future", human_duration(seconds.unsigned_abs()))
    };
    format!("{} ({age})", time.round(jiff::Unit::Second).unwrap_or(time))
}

/// kubectl's short ages: `45s`, `3m2s`, `42m`, `5h10m`, `3d4h`.
pub fn human_duration(seconds: u64) -> String {
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 => format!("{minutes}m{}s", seconds % 60),
        600..10_800 => format!("{minutes}m"),
        10_800..172_800 => format!("{hours}h{}m", minutes % 60),
        _ => format!("{days}d{}h", hours % 24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(now: Timestamp) -> NodeReport {
        let at = |ago: i64| (now - jiff::SignedDuration::from_secs(ago)).to_string();
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "worker-1" },
            "status": { "conditions": [
                { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                  "message": "kubelet has sufficient memory available",
                  "lastHeartbeatTime": at(5), "lastTransitionTime": at(3_700) },
                { "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                  "message": "container runtime is down",
                  "lastHeartbeatTime": at(5), "lastTransitionTime": at(42) },
            ]},
        }))
        .expect("a node");
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "worker-1", "namespace": "kube-node-lease" },
            "spec": { "holderIdentity": "worker-1", "leaseDurationSeconds": 40,
                      "renewTime": (now - jiff::SignedDuration::from_secs(3)).to_string() },
        }))
        .expect("a lease");
        NodeReport {
            node,
            lease: Some(lease),
            server: "https://10.0.0.1:6443/".into(),
            source: KubeconfigSource::InCluster,
        }
    }

    #[test]
    fn each_condition_shows_status_reason_message_and_ages() {
        let now: Timestamp = "2026-11-29T22:00:00Z".parse().expect("a time");
        let text = render(&report(now), now);
        let ready = text
            .lines()
            .find(|line| line.trim_start().starts_with("Ready"))
            .expect("a Ready line");
        for part in [
            "False",
            "2026-11-29T21:59:55Z (5s ago)",
            "2026-11-29T21:59:18Z (42s ago)",
            "KubeletNotReady",
            "container runtime is down",
        ] {
            assert!(ready.contains(part), "{part:?} missing from {ready:?}");
        }
        assert!(text.contains("(61m ago)"), "{text}");
        assert!(
            text.contains(
                "Lease:       holder worker-1, renewed 2026-11-29T21:59:57Z (3s ago), duration 40s"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_missing_lease_says_the_node_is_not_heartbeating() {
        let now = Timestamp::now();
        let mut report = report(now);
        report.lease = None;
        assert!(render(&report, now).contains("not heartbeating"));
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(182), "3m2s");
        assert_eq!(human_duration(42 * 60), "42m");
        assert_eq!(human_duration(5 * 3600 + 600), "5h10m");
        assert_eq!(human_duration(3 * 86_400 + 4 * 3600), "3d4h");
    }
}
