//! Checks that go beyond types: ranges, relations between fields, and addresses that parse.

use std::net::SocketAddr;

use nodepulse_actors::eviction::{ThresholdConfig, parse_thresholds};

use super::{
    duration::GoDuration,
    model::{Config, RuntimeKind},
};

pub(super) struct Invalid {
    pub field: String,
    pub value: String,
    pub reason: String,
}

fn invalid(field: &str, value: impl std::fmt::Display, reason: &str) -> Invalid {
    Invalid {
        field: field.to_owned(),
        value: value.to_string(),
        reason: reason.to_owned(),
    }
}

pub(super) fn validate(config: &Config) -> Result<(), Invalid> {
    if let Some(name) = &config.node_name {
        validate_node_name(name)?;
    }
    positive(
        "nodeStatusUpdateFrequency",
        config.node_status_update_frequency,
    )?;
    if config.node_lease_duration_seconds <= 0 {
        return Err(invalid(
            "nodeLeaseDurationSeconds",
            config.node_lease_duration_seconds,
            "must be greater than zero",
        ));
    }
    if let Some(qps) = config.kube_api_qps {
        at_least_one("kubeAPIQPS", qps as usize)?;
    }
    if let Some(burst) = config.kube_api_burst
        && burst < config.effective_api_qps()
    {
        return Err(invalid(
            "kubeAPIBurst",
            burst,
            "must be at least kubeAPIQPS",
        ));
    }
    if let Some(report) = config.node_status_report_frequency {
        positive("nodeStatusReportFrequency", report)?;
    }
    at_least_one("maxPods", config.max_pods as usize)?;
    positive(
        "containerRuntimeDownAfter",
        config.container_runtime_down_after,
    )?;
    for (section, reserved) in [
        ("systemReserved", &config.system_reserved),
        ("kubeReserved", &config.kube_reserved),
    ] {
        for (resource, quantity) in reserved {
            let field = format!("{section}.{resource}");
            if !matches!(
                resource.as_str(),
                "cpu" | "memory" | "ephemeral-storage" | "pid"
            ) {
                return Err(invalid(
                    &field,
                    quantity,
                    "reservable resources are cpu, memory, ephemeral-storage and pid",
                ));
            }
            match nodepulse_actors::quantity::parse_quantity(quantity) {
                Ok(value) if value >= 0.0 => {}
                Ok(_) => return Err(invalid(&field, quantity, "must not be negative")),
                Err(error) => return Err(invalid(&field, quantity, error.reason)),
            }
        }
    }
    for (index, taint) in config.register_with_taints.iter().enumerate() {
        if !matches!(
            taint.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        ) {
            return Err(invalid(
                &format!("registerWithTaints[{index}].effect"),
                &taint.effect,
                "must be NoSchedule, PreferNoSchedule or NoExecute",
            ));
        }
        if taint.key.is_empty() {
            return Err(invalid(
                &format!("registerWithTaints[{index}].key"),
                &taint.key,
                "must not be empty",
            ));
        }
    }
    if config.node_ip.len() > 2 {
        return Err(invalid(
            "nodeIP",
            config.node_ip.join(","),
            "at most two addresses, one per IP family",
        ));
    }
    for (index, address) in config.node_ip.iter().enumerate() {
        if address.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(
                &format!("nodeIP[{index}]"),
                address,
                "expected an IP address",
            ));
        }
    }
    at_least_one("eventRecordQPS", config.event_record_qps as usize)?;
    if config.event_burst < config.event_record_qps {
        return Err(invalid(
            "eventBurst",
            config.event_burst,
            "must be at least eventRecordQPS",
        ));
    }
    for server in &config.cluster_dns {
        if server.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid("clusterDNS", server, "not an IP address"));
        }
    }
    if let Err(reason) = nodepulse_actors::pods::ip_pool::Cidr::parse(&config.pod_cidr) {
        return Err(invalid("podCIDR", &config.pod_cidr, &reason));
    }
    validate_runtime(config)?;
    validate_eviction(config)?;
    validate_fleet(config)?;
    let supervision = &config.supervision;
    positive("supervision.livenessTimeout", supervision.liveness_timeout)?;
    positive(
        "supervision.livenessInterval",
        supervision.liveness_interval,
    )?;
    if supervision.liveness_interval > supervision.liveness_timeout {
        return Err(invalid(
            "supervision.livenessInterval",
            supervision.liveness_interval,
            "must not exceed supervision.livenessTimeout: a hang is declared within livenessTimeout + livenessInterval, so a longer check period would let it go unnoticed for more than twice the timeout",
        ));
    }
    at_least_one("supervision.maxRestarts", supervision.max_restarts as usize)?;
    positive("supervision.restartWindow", supervision.restart_window)?;
    at_least_one("supervision.mailboxCapacity", supervision.mailbox_capacity)?;
    let backoff = &supervision.backoff;
    positive("supervision.backoff.initial", backoff.initial)?;
    if backoff.max < backoff.initial {
        return Err(invalid(
            "supervision.backoff.max",
            backoff.max,
            "must be at least supervision.backoff.initial",
        ));
    }
    if !(backoff.multiplier.is_finite() && backoff.multiplier >= 1.0) {
        return Err(invalid(
            "supervision.backoff.multiplier",
            backoff.multiplier,
            "must be a number of at least 1",
        ));
    }
    if !(0.0..=1.0).contains(&backoff.jitter) {
        return Err(invalid(
            "supervision.backoff.jitter",
            backoff.jitter,
            "must be between 0 and 1",
        ));
    }
    validate_address("debug.address", &config.debug.address)?;
    let fault_injection = &config.debug.fault_injection;
    if fault_injection.enabled {
        let token = fault_injection.token.as_deref().unwrap_or("");
        if token.trim().len() < 16 {
            return Err(Invalid {
                field: "debug.faultInjection.token".to_owned(),
                // Never echo a secret, even a bad one.
                value: "(hidden)".to_owned(),
                reason: "fault injection is enabled, so a bearer token of at least 16 characters is required".to_owned(),
            });
        }
    }
    validate_address("standalone.apiAddress", &config.standalone.api_address)?;
    validate_host_root(config)?;
    Ok(())
}

/// The one check that looks at the filesystem: a `hostRoot` whose mount is missing would
/// leave every housekeeping pass failing, so it is refused at start (and by `check-config`,
/// run on the node) instead. Last, so a file's other mistakes are reported first.
fn validate_host_root(config: &Config) -> Result<(), Invalid> {
    let root = &config.host_root;
    let refuse = |reason: &str| Err(invalid("hostRoot", root.display(), reason));
    if !root.is_absolute() {
        return refuse("must be an absolute path, such as / or /host");
    }
    if !root.is_dir() {
        return refuse(
            "no such directory: mount the host's root there (a DaemonSet: a hostPath volume of / at that path) or leave hostRoot at /",
        );
    }
    if !root.join("proc/meminfo").is_file() {
        return refuse(
            "has no proc/meminfo: the host's /proc must be visible under hostRoot (mounted with the host's root, or on its own)",
        );
    }
    Ok(())
}

fn validate_runtime(config: &Config) -> Result<(), Invalid> {
    if config.runtime == RuntimeKind::Cri
        && let Err(error) = super::socket_path(&config.container_runtime_endpoint)
    {
        return Err(invalid(
            "containerRuntimeEndpoint",
            &error.0,
            "only unix sockets are supported: write unix:///absolute/path.sock",
        ));
    }
    positive("runtimeRequestTimeout", config.runtime_request_timeout)?;
    positive("runtimeProbePeriod", config.runtime_probe_period)?;
    positive("syncFrequency", config.sync_frequency)?;
    Ok(())
}

/// The eviction thresholds, with the kubelet's reasons; and the housekeeping cadence.
fn validate_eviction(config: &Config) -> Result<(), Invalid> {
    let grace: std::collections::BTreeMap<String, std::time::Duration> = config
        .eviction_soft_grace_period
        .iter()
        .map(|(signal, duration)| (signal.clone(), duration.0))
        .collect();
    let thresholds = ThresholdConfig {
        hard: &config.eviction_hard,
        soft: &config.eviction_soft,
        soft_grace_period: &grace,
        minimum_reclaim: &config.eviction_minimum_reclaim,
    };
    parse_thresholds(&thresholds, true).map_err(|error| {
        invalid(
            &format!("{}.{}", error.setting, error.signal),
            &error.value,
            &error.reason,
        )
    })?;
    positive(
        "evictionPressureTransitionPeriod",
        config.eviction_pressure_transition_period,
    )?;
    if config.housekeeping_interval.0 < std::time::Duration::from_secs(1) {
        return Err(invalid(
            "housekeepingInterval",
            config.housekeeping_interval,
            "must be at least 1s",
        ));
    }
    Ok(())
}

fn positive(field: &str, duration: GoDuration) -> Result<(), Invalid> {
    if duration.0.is_zero() {
        return Err(invalid(field, duration, "must be greater than zero"));
    }
    Ok(())
}

fn at_least_one(field: &str, value: usize) -> Result<(), Invalid> {
    if value == 0 {
        return Err(invalid(field, value, "must be at least 1"));
    }
    Ok(())
}

fn validate_address(field: &str, address: &str) -> Result<(), Invalid> {
    address.parse::<SocketAddr>().map(|_| ()).map_err(|_| {
        invalid(
            field,
            address,
            "expected an IP address and port, such as 127.0.0.1:10280",
        )
    })
}

/// A fleet's nodes: simulated, uniquely and validly named, with capacities that parse.
fn validate_fleet(config: &Config) -> Result<(), Invalid> {
    if !config.nodes.is_empty() && config.runtime != RuntimeKind::Simulated {
        return Err(invalid(
            "nodes",
            format!("{} nodes", config.nodes.len()),
            "a fleet of nodes in one process needs runtime: simulated",
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (index, node) in config.nodes.iter().enumerate() {
        validate_node_name(&node.name).map_err(|error| Invalid {
            field: format!("nodes[{index}].name"),
            ..error
        })?;
        if !names.insert(node.name.as_str()) {
            return Err(invalid(
                &format!("nodes[{index}].name"),
                &node.name,
                "another node of the fleet has this name",
            ));
        }
        for (resource, quantity) in &node.capacity {
            let field = format!("nodes[{index}].capacity.{resource}");
            if !matches!(resource.as_str(), "cpu" | "memory") {
                return Err(invalid(&field, quantity, "capacity may set cpu and memory"));
            }
            match nodepulse_actors::quantity::parse_quantity(quantity) {
                Ok(value) if value > 0.0 => {}
                Ok(_) => return Err(invalid(&field, quantity, "must be greater than zero")),
                Err(error) => return Err(invalid(&field, quantity, error.reason)),
            }
        }
    }
    Ok(())
}

/// A Node name is a DNS subdomain (RFC 1123): lower-case alphanumerics, `-` and `.`,
/// starting and ending alphanumeric, at most 253 characters.
fn validate_node_name(name: &str) -> Result<(), Invalid> {
    let alphanumeric = |byte: u8| byte.is_ascii_lowercase() || byte.is_ascii_digit();
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 253
        && bytes
            .iter()
            .all(|&byte| alphanumeric(byte) || byte == b'-' || byte == b'.')
        && bytes.first().copied().is_some_and(alphanumeric)
        && bytes.last().copied().is_some_and(alphanumeric);
    if valid {
        Ok(())
    } else {
        Err(invalid(
            "nodeName",
            name,
            "a Node name must be a lower-case RFC 1123 subdomain: letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters",
        ))
    }
}

/// Validates a node name given outside the file (`--node-name` or the host name).
pub fn check_node_name(name: &str) -> Result<(), String> {
    validate_node_name(name).map_err(|invalid| format!("{:?}: {}", invalid.value, invalid.reason))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError, Source};

    fn refusal(yaml: &str) -> (String, String) {
        match Config::parse(yaml, Source::Embedded) {
            Err(ConfigError::Invalid { field, reason, .. }) => (field, reason),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn host_root_defaults_to_the_root_and_puts_root_dir_under_it() {
        let config = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(config.host_root, std::path::Path::new("/"));
        assert_eq!(
            config.root_dir_on_host(),
            std::path::Path::new("/var/lib/kubelet")
        );
    }

    #[test]
    fn a_host_root_with_a_proc_meminfo_is_accepted() {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(root.path().join("proc")).expect("mkdir");
        std::fs::write(root.path().join("proc/meminfo"), "MemTotal: 1 kB\n").expect("write");
        let yaml = format!("hostRoot: {}\n", root.path().display());
        let config = Config::parse(&yaml, Source::Embedded).expect("valid");
        assert_eq!(
            config.root_dir_on_host(),
            root.path().join("var/lib/kubelet")
        );
    }

    #[test]
    fn a_missing_relative_or_empty_host_root_is_refused_naming_the_field() {
        let (field, reason) = refusal("hostRoot: /no/such/nodepulse/host\n");
        assert_eq!(field, "hostRoot");
        assert!(reason.contains("no such directory"), "{reason}");
        let (field, reason) = refusal("hostRoot: host\n");
        assert_eq!(field, "hostRoot");
        assert!(reason.contains("absolute"), "{reason}");
        let empty = tempfile::tempdir().expect("temp dir");
        let (field, reason) = refusal(&format!("hostRoot: {}\n", empty.path().display()));
        assert_eq!(field, "hostRoot");
        assert!(reason.contains("proc/meminfo"), "{reason}");
    }
}
