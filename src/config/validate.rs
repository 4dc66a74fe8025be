//! Checks that go beyond types: ranges, relations between fields, and addresses that parse.
//! Every check runs, whatever an earlier one found, so a file's mistakes are reported together
//! instead of one per attempt.

use std::net::SocketAddr;

use nodepulse_actors::eviction::{ThresholdConfig, parse_thresholds};

use super::{
    duration::GoDuration,
    model::{Config, RuntimeKind},
};

/// One refused setting: the field, its value as written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSetting {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for InvalidSetting {
    /// The value is quoted so a blank one is still visible.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: invalid value {:?}: {}",
            self.field, self.value, self.reason
        )
    }
}

impl std::error::Error for InvalidSetting {}

/// The refusals found so far.
#[derive(Default)]
struct Problems(Vec<InvalidSetting>);

impl Problems {
    fn push(&mut self, invalid: InvalidSetting) {
        self.0.push(invalid);
    }

    fn check(&mut self, result: Result<(), InvalidSetting>) {
        if let Err(invalid) = result {
            self.0.push(invalid);
        }
    }
}

fn invalid(field: &str, value: impl std::fmt::Display, reason: &str) -> InvalidSetting {
    InvalidSetting {
        field: field.to_owned(),
        value: value.to_string(),
        reason: reason.to_owned(),
    }
}

/// Every refusal of `config`, in the order of its fields; none for a valid one.
pub(super) fn validate(config: &Config) -> Result<(), Vec<InvalidSetting>> {
    let mut problems = Problems::default();
    validate_node(config, &mut problems);
    validate_runtime(config, &mut problems);
    validate_eviction(config, &mut problems);
    validate_image_gc(config, &mut problems);
    validate_container_logs(config, &mut problems);
    validate_fleet(config, &mut problems);
    validate_static_pods(config, &mut problems);
    validate_supervision(config, &mut problems);
    validate_endpoints(config, &mut problems);
    problems.check(validate_host_root(config));
    validate_system_cgroups(config, &mut problems);
    for invalid in super::cgroups::validate_cgroups(config) {
        problems.push(invalid);
    }
    if problems.0.is_empty() {
        Ok(())
    } else {
        Err(problems.0)
    }
}

/// The node's own settings: name, cadences, API rates, reservations, taints, addresses.
fn validate_node(config: &Config, problems: &mut Problems) {
    if let Some(name) = &config.node_name {
        problems.check(validate_node_name(name));
    }
    problems.check(positive(
        "nodeStatusUpdateFrequency",
        config.node_status_update_frequency,
    ));
    if config.node_lease_duration_seconds <= 0 {
        problems.push(invalid(
            "nodeLeaseDurationSeconds",
            config.node_lease_duration_seconds,
            "must be greater than zero",
        ));
    }
    if let Some(qps) = config.kube_api_qps {
        problems.check(at_least_one("kubeAPIQPS", qps as usize));
    }
    if let Some(burst) = config.kube_api_burst
        && burst < config.effective_api_qps()
    {
        problems.push(invalid(
            "kubeAPIBurst",
            burst,
            "must be at least kubeAPIQPS",
        ));
    }
    if let Some(report) = config.node_status_report_frequency {
        problems.check(positive("nodeStatusReportFrequency", report));
    }
    problems.check(at_least_one("maxPods", config.max_pods as usize));
    problems.check(positive(
        "containerRuntimeDownAfter",
        config.container_runtime_down_after,
    ));
    problems.check(positive(
        "plegRelistThreshold",
        config.pleg_relist_threshold,
    ));
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
                problems.push(invalid(
                    &field,
                    quantity,
                    "reservable resources are cpu, memory, ephemeral-storage and pid",
                ));
                continue;
            }
            match nodepulse_actors::quantity::parse_quantity(quantity) {
                Ok(value) if value >= 0.0 => {}
                Ok(_) => problems.push(invalid(&field, quantity, "must not be negative")),
                Err(error) => problems.push(invalid(&field, quantity, error.reason)),
            }
        }
    }
    for (index, taint) in config.register_with_taints.iter().enumerate() {
        if !matches!(
            taint.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        ) {
            problems.push(invalid(
                &format!("registerWithTaints[{index}].effect"),
                &taint.effect,
                "must be NoSchedule, PreferNoSchedule or NoExecute",
            ));
        }
        if taint.key.is_empty() {
            problems.push(invalid(
                &format!("registerWithTaints[{index}].key"),
                &taint.key,
                "must not be empty",
            ));
        }
    }
    if config.node_ip.len() > 2 {
        problems.push(invalid(
            "nodeIP",
            config.node_ip.join(","),
            "at most two addresses, one per IP family",
        ));
    }
    for (index, address) in config.node_ip.iter().enumerate() {
        if address.parse::<std::net::IpAddr>().is_err() {
            problems.push(invalid(
                &format!("nodeIP[{index}]"),
                address,
                "expected an IP address",
            ));
        }
    }
    problems.check(at_least_one(
        "eventRecordQPS",
        config.event_record_qps as usize,
    ));
    if config.event_burst < config.event_record_qps {
        problems.push(invalid(
            "eventBurst",
            config.event_burst,
            "must be at least eventRecordQPS",
        ));
    }
    for pattern in &config.allowed_unsafe_sysctls {
        if let Some(reason) = nodepulse_actors::pods::sysctls::pattern_error(pattern) {
            problems.push(invalid("allowedUnsafeSysctls", pattern, &reason));
        }
    }
    if let Some(ids) = config.user_namespaces.as_ref().and_then(|u| u.ids_per_pod) {
        // The kubelet's validation_linux.go checks and words.
        let unit = i64::from(nodepulse_cri::provider::UNIT_LENGTH);
        let reason = if ids < unit {
            Some(format!("must not be less than {unit}"))
        } else if ids % unit != 0 {
            Some(format!("must be a multiple of {unit}"))
        } else if ids > i64::from(u32::MAX) {
            Some(format!("must not be more than {}", u32::MAX))
        } else {
            None
        };
        if let Some(reason) = reason.filter(|_| ids != 0) {
            problems.push(invalid("userNamespaces.idsPerPod", ids, &reason));
        }
    }
    for server in &config.cluster_dns {
        if server.parse::<std::net::IpAddr>().is_err() {
            problems.push(invalid("clusterDNS", server, "not an IP address"));
        }
    }
    if let Err(reason) = nodepulse_actors::pods::ip_pool::Cidr::parse(&config.pod_cidr) {
        problems.push(invalid("podCIDR", &config.pod_cidr, &reason.to_string()));
    }
}

fn validate_supervision(config: &Config, problems: &mut Problems) {
    let supervision = &config.supervision;
    problems.check(positive(
        "supervision.livenessTimeout",
        supervision.liveness_timeout,
    ));
    problems.check(positive(
        "supervision.livenessInterval",
        supervision.liveness_interval,
    ));
    if supervision.liveness_interval > supervision.liveness_timeout {
        problems.push(invalid(
            "supervision.livenessInterval",
            supervision.liveness_interval,
            "must not exceed supervision.livenessTimeout: a hang is declared within livenessTimeout + livenessInterval, so a longer check period would let it go unnoticed for more than twice the timeout",
        ));
    }
    problems.check(at_least_one(
        "supervision.maxRestarts",
        supervision.max_restarts as usize,
    ));
    problems.check(positive(
        "supervision.restartWindow",
        supervision.restart_window,
    ));
    problems.check(at_least_one(
        "supervision.mailboxCapacity",
        supervision.mailbox_capacity,
    ));
    let backoff = &supervision.backoff;
    problems.check(positive("supervision.backoff.initial", backoff.initial));
    if backoff.max < backoff.initial {
        problems.push(invalid(
            "supervision.backoff.max",
            backoff.max,
            "must be at least supervision.backoff.initial",
        ));
    }
    if !(backoff.multiplier.is_finite() && backoff.multiplier >= 1.0) {
        problems.push(invalid(
            "supervision.backoff.multiplier",
            backoff.multiplier,
            "must be a number of at least 1",
        ));
    }
    if !(0.0..=1.0).contains(&backoff.jitter) {
        problems.push(invalid(
            "supervision.backoff.jitter",
            backoff.jitter,
            "must be between 0 and 1",
        ));
    }
}

/// The debug endpoint (and its fault injection) and the standalone API server.
fn validate_endpoints(config: &Config, problems: &mut Problems) {
    problems.check(validate_address("debug.address", &config.debug.address));
    let fault_injection = &config.debug.fault_injection;
    if fault_injection.enabled {
        let token = fault_injection.token.as_deref().unwrap_or("");
        if token.trim().len() < 16 {
            problems.push(InvalidSetting {
                field: "debug.faultInjection.token".to_owned(),
                // Never echo a secret, even a bad one.
                value: super::HIDDEN.to_owned(),
                reason: "fault injection is enabled, so a bearer token of at least 16 characters is required".to_owned(),
            });
        }
    }
    problems.check(validate_address(
        "standalone.apiAddress",
        &config.standalone.api_address,
    ));
    validate_kubelet_api(config, problems);
}

/// The kubelet API's listeners and TLS settings; whether the files they name hold a usable
/// certificate and key is checked where they are loaded (at start, and by `check-config`).
fn validate_kubelet_api(config: &Config, problems: &mut Problems) {
    let ip = |field: &str, value: &str| {
        value
            .parse::<std::net::IpAddr>()
            .map(|_| ())
            .map_err(|_| invalid(field, value, "expected an IP address, such as 0.0.0.0"))
    };
    problems.check(ip("address", &config.address));
    problems.check(ip("healthzBindAddress", &config.healthz_bind_address));
    if config.read_only_port != 0 {
        problems.push(invalid(
            "readOnlyPort",
            config.read_only_port,
            "nodepulse does not serve the unauthenticated read-only port: leave it at 0",
        ));
    }
    match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(_), None) => problems.push(invalid(
            "tlsPrivateKeyFile",
            "",
            "tlsCertFile is set, so its private key file is required too",
        )),
        (None, Some(_)) => problems.push(invalid(
            "tlsCertFile",
            "",
            "tlsPrivateKeyFile is set, so its certificate file is required too",
        )),
        _ => {}
    }
    if config.server_tls_bootstrap && config.runtime != RuntimeKind::Cri {
        problems.push(invalid(
            "serverTLSBootstrap",
            true,
            "only a runtime: cri node serves the kubelet API, whose serving certificate this asks for",
        ));
    }
    if let Some(version) = &config.tls_min_version
        && !matches!(version.as_str(), "VersionTLS12" | "VersionTLS13")
    {
        problems.push(invalid(
            "tlsMinVersion",
            version,
            "expected VersionTLS12 or VersionTLS13",
        ));
    }
}

/// The one check that looks at the filesystem: a `hostRoot` whose mount is missing would
/// leave every housekeeping pass failing, so it is refused at start (and by `check-config`,
/// run on the node) instead. Last, so a file's other mistakes are listed first.
/// The system containers' cgroups are absolute cgroup paths; the system's may not be the root
/// (the kubelet's "system container cannot be root").
fn validate_system_cgroups(config: &Config, problems: &mut Problems) {
    for (field, value) in [
        ("kubeletCgroups", &config.kubelet_cgroups),
        ("runtimeCgroups", &config.runtime_cgroups),
        ("systemCgroups", &config.system_cgroups),
    ] {
        let Some(value) = value else { continue };
        if !value.starts_with('/') {
            problems.push(invalid(field, value, "must be an absolute cgroup path"));
        } else if value.split('/').any(|part| part == "..") {
            problems.push(invalid(field, value, "must not contain \"..\""));
        } else if field == "systemCgroups" && value == "/" {
            problems.push(invalid(
                field,
                value,
                "system container cannot be root (\"/\")",
            ));
        }
    }
}

fn validate_host_root(config: &Config) -> Result<(), InvalidSetting> {
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

fn validate_runtime(config: &Config, problems: &mut Problems) {
    if config.runtime == RuntimeKind::Cri
        && let Err(error) = super::socket_path(&config.container_runtime_endpoint)
    {
        problems.push(invalid(
            "containerRuntimeEndpoint",
            &error.0,
            "only unix sockets are supported: write unix:///absolute/path.sock",
        ));
    }
    problems.check(positive(
        "runtimeRequestTimeout",
        config.runtime_request_timeout,
    ));
    problems.check(positive("runtimeProbePeriod", config.runtime_probe_period));
    if let Some(sandboxes) = config.max_parallel_sandboxes {
        problems.check(at_least_one("maxParallelSandboxes", sandboxes as usize));
    }
    problems.check(positive("syncFrequency", config.sync_frequency));
}

/// The eviction thresholds, with the kubelet's reasons; and the housekeeping cadence.
fn validate_eviction(config: &Config, problems: &mut Problems) {
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
    // The thresholds' parser (the kubelet's) stops at its first refusal: one per file.
    if let Err(error) = parse_thresholds(&thresholds, true) {
        problems.push(invalid(
            &format!("{}.{}", error.setting, error.signal),
            &error.value,
            &error.reason,
        ));
    }
    problems.check(positive(
        "evictionPressureTransitionPeriod",
        config.eviction_pressure_transition_period,
    ));
    if config.housekeeping_interval.0 < std::time::Duration::from_secs(1) {
        problems.push(invalid(
            "housekeepingInterval",
            config.housekeeping_interval,
            "must be at least 1s",
        ));
    }
}

/// The image GC thresholds and ages, with the kubelet's reasons.
fn validate_image_gc(config: &Config, problems: &mut Problems) {
    let (high, low) = (
        config.image_gc_high_threshold_percent,
        config.image_gc_low_threshold_percent,
    );
    for (field, value) in [
        ("imageGCHighThresholdPercent", high),
        ("imageGCLowThresholdPercent", low),
    ] {
        if !(0..=100).contains(&value) {
            problems.push(invalid(
                field,
                value,
                "must be between 0 and 100, inclusive",
            ));
        }
    }
    if low >= high && (0..=100).contains(&high) {
        problems.push(invalid(
            "imageGCLowThresholdPercent",
            low,
            &format!("must be less than imageGCHighThresholdPercent ({high})"),
        ));
    }
    let (min_age, max_age) = (config.image_minimum_gc_age, config.image_maximum_gc_age);
    if !max_age.0.is_zero() && max_age <= min_age {
        problems.push(invalid(
            "imageMaximumGCAge",
            max_age,
            &format!("must be greater than imageMinimumGCAge ({min_age})"),
        ));
    }
    problems.check(positive("imageGCPeriod", config.image_gc_period));
}

/// The container log rotation settings, with the kubelet's limits and reasons.
fn validate_container_logs(config: &Config, problems: &mut Problems) {
    if let Err(reason) = super::parse_max_size(&config.container_log_max_size) {
        problems.push(invalid(
            "containerLogMaxSize",
            &config.container_log_max_size,
            &reason.to_string(),
        ));
    }
    if config.container_log_max_files <= 1 {
        problems.push(invalid(
            "containerLogMaxFiles",
            config.container_log_max_files,
            "must be greater than 1",
        ));
    }
    if config.container_log_max_workers < 1 {
        problems.push(invalid(
            "containerLogMaxWorkers",
            config.container_log_max_workers,
            "must be greater than or equal to 1",
        ));
    }
    if config.container_log_monitor_interval.0 < std::time::Duration::from_secs(3) {
        problems.push(invalid(
            "containerLogMonitorInterval",
            config.container_log_monitor_interval,
            "must be a positive time duration greater than or equal to 3s",
        ));
    }
}

fn positive(field: &str, duration: GoDuration) -> Result<(), InvalidSetting> {
    if duration.0.is_zero() {
        return Err(invalid(field, duration, "must be greater than zero"));
    }
    Ok(())
}

fn at_least_one(field: &str, value: usize) -> Result<(), InvalidSetting> {
    if value == 0 {
        return Err(invalid(field, value, "must be at least 1"));
    }
    Ok(())
}

fn validate_address(field: &str, address: &str) -> Result<(), InvalidSetting> {
    address.parse::<SocketAddr>().map(|_| ()).map_err(|_| {
        invalid(
            field,
            address,
            "expected an IP address and port, such as 127.0.0.1:10280",
        )
    })
}

/// A fleet's nodes: simulated, uniquely and validly named, with capacities that parse.
/// The static pod source: an absolute path (nodepulse may be started from anywhere), read on a
/// positive period, for one node (a fleet's simulated nodes share one process and no manifest).
fn validate_static_pods(config: &Config, problems: &mut Problems) {
    problems.check(positive("fileCheckFrequency", config.file_check_frequency));
    problems.check(positive("httpCheckFrequency", config.http_check_frequency));
    validate_static_pod_url(config, problems);
    let Some(path) = config.static_pod_path() else {
        return;
    };
    if !path.is_absolute() {
        problems.push(invalid(
            "staticPodPath",
            path.display(),
            "must be an absolute path",
        ));
    }
    if !config.nodes.is_empty() {
        problems.push(invalid(
            "staticPodPath",
            path.display(),
            "static pods run on one node: a fleet (nodes) has none",
        ));
    }
}

/// `staticPodURL`: an `http` URL with a host, for one node; its headers' names and values
/// must be sendable.
fn validate_static_pod_url(config: &Config, problems: &mut Problems) {
    for (name, values) in &config.static_pod_url_header {
        if http::HeaderName::try_from(name.as_str()).is_err() {
            problems.push(invalid(
                "staticPodURLHeader",
                name,
                "not a valid HTTP header name",
            ));
        }
        for value in values {
            if http::HeaderValue::try_from(value.as_str()).is_err() {
                problems.push(invalid(
                    "staticPodURLHeader",
                    format!("{name}: {value}"),
                    "not a valid HTTP header value",
                ));
            }
        }
    }
    let Some(url) = config.static_pod_url() else {
        return;
    };
    match url.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {}
        _ => problems.push(invalid(
            "staticPodURL",
            url,
            "expected an http or https URL with a host, such as http://127.0.0.1:8080/pods",
        )),
    }
    if !config.nodes.is_empty() {
        problems.push(invalid(
            "staticPodURL",
            url,
            "static pods run on one node: a fleet (nodes) has none",
        ));
    }
}

fn validate_fleet(config: &Config, problems: &mut Problems) {
    if !config.nodes.is_empty() && config.runtime != RuntimeKind::Simulated {
        problems.push(invalid(
            "nodes",
            format!("{} nodes", config.nodes.len()),
            "a fleet of nodes in one process needs runtime: simulated",
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (index, node) in config.nodes.iter().enumerate() {
        if let Err(error) = validate_node_name(&node.name) {
            problems.push(InvalidSetting {
                field: format!("nodes[{index}].name"),
                ..error
            });
        } else if !names.insert(node.name.as_str()) {
            problems.push(invalid(
                &format!("nodes[{index}].name"),
                &node.name,
                "another node of the fleet has this name",
            ));
        }
        for (resource, quantity) in &node.capacity {
            let field = format!("nodes[{index}].capacity.{resource}");
            if !matches!(resource.as_str(), "cpu" | "memory") {
                problems.push(invalid(&field, quantity, "capacity may set cpu and memory"));
                continue;
            }
            match nodepulse_actors::quantity::parse_quantity(quantity) {
                Ok(value) if value > 0.0 => {}
                Ok(_) => problems.push(invalid(&field, quantity, "must be greater than zero")),
                Err(error) => problems.push(invalid(&field, quantity, error.reason)),
            }
        }
    }
}

/// A Node name is a DNS subdomain (RFC 1123): lower-case alphanumerics, `-` and `.`,
/// starting and ending alphanumeric, at most 253 characters.
fn validate_node_name(name: &str) -> Result<(), InvalidSetting> {
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
pub fn check_node_name(name: &str) -> Result<(), InvalidSetting> {
    validate_node_name(name)
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError, Source};

    fn refusal(yaml: &str) -> (String, String) {
        match Config::parse(yaml, Source::Embedded) {
            Err(ConfigError::Invalid { settings, .. }) if settings.len() == 1 => {
                (settings[0].field.clone(), settings[0].reason.clone())
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn max_parallel_sandboxes_is_at_least_one_and_unset_by_default() {
        let defaults = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(defaults.max_parallel_sandboxes, None);
        let set = Config::parse("maxParallelSandboxes: 8\n", Source::Embedded).expect("valid");
        assert_eq!(set.max_parallel_sandboxes, Some(8));
        let (field, reason) = refusal("maxParallelSandboxes: 0\n");
        assert_eq!(field, "maxParallelSandboxes");
        assert!(reason.contains("at least 1"), "{reason}");
    }

    #[test]
    fn the_kubelet_api_settings_are_refused_naming_the_field() {
        for (yaml, field) in [
            ("address: everywhere\n", "address"),
            ("healthzBindAddress: localhost\n", "healthzBindAddress"),
            ("readOnlyPort: 10255\n", "readOnlyPort"),
            ("tlsCertFile: /etc/kubelet.crt\n", "tlsPrivateKeyFile"),
            ("tlsPrivateKeyFile: /etc/kubelet.key\n", "tlsCertFile"),
            ("tlsMinVersion: VersionTLS10\n", "tlsMinVersion"),
        ] {
            assert_eq!(refusal(yaml).0, field, "{yaml}");
        }
        let config = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(
            (config.address.as_str(), config.port, config.read_only_port),
            ("0.0.0.0", 10250, 0)
        );
        assert_eq!(
            (config.healthz_bind_address.as_str(), config.healthz_port),
            ("127.0.0.1", 10248)
        );
        assert!(config.authentication.webhook.enabled);
        assert!(!config.authentication.anonymous.enabled);
        assert_eq!(
            config.authorization.mode,
            crate::config::AuthorizationMode::Webhook
        );
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
    fn the_static_pod_settings_are_refused_naming_the_field() {
        let defaults = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(defaults.static_pod_path(), None);
        assert_eq!(defaults.file_check_frequency.0.as_secs(), 20);
        let empty = Config::parse("staticPodPath: \"\"\n", Source::Embedded).expect("valid");
        assert_eq!(
            empty.static_pod_path(),
            None,
            "empty is off, as in the kubelet"
        );
        let (field, reason) = refusal("staticPodPath: manifests\n");
        assert_eq!(
            (field.as_str(), reason.as_str()),
            ("staticPodPath", "must be an absolute path")
        );
        let (field, _) =
            refusal("staticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: 0s\n");
        assert_eq!(field, "fileCheckFrequency");
        let (field, reason) = refusal(
            "runtime: simulated\nstaticPodPath: /etc/kubernetes/manifests\nnodes: [{name: sim-1}]\n",
        );
        assert_eq!(field, "staticPodPath");
        assert!(reason.contains("fleet"), "{reason}");
    }

    #[test]
    fn the_static_pod_url_settings_default_as_the_kubelet_and_are_refused_naming_the_field() {
        let defaults = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(defaults.static_pod_url(), None);
        assert!(defaults.static_pod_url_header.is_empty());
        assert_eq!(defaults.http_check_frequency.0.as_secs(), 20);
        let set = Config::parse(
            "staticPodURL: http://127.0.0.1:8080/pods\nstaticPodURLHeader: {X-Token: [a, b]}\nhttpCheckFrequency: 5s\n",
            Source::Embedded,
        )
        .expect("valid");
        assert_eq!(set.static_pod_url(), Some("http://127.0.0.1:8080/pods"));
        assert_eq!(set.static_pod_url_header["X-Token"], ["a", "b"]);
        assert_eq!(set.http_check_frequency.0.as_secs(), 5);
        let https = Config::parse("staticPodURL: https://h/pods\n", Source::Embedded);
        assert!(https.is_ok(), "https is taken: {https:?}");
        for (yaml, field, says) in [
            (
                "staticPodURL: /pods\n",
                "staticPodURL",
                "expected an http or https URL",
            ),
            (
                "staticPodURL: ftp://h/pods\n",
                "staticPodURL",
                "expected an http or https URL",
            ),
            (
                "staticPodURL: http://h/\nhttpCheckFrequency: 0s\n",
                "httpCheckFrequency",
                "greater than zero",
            ),
            (
                "staticPodURLHeader: {\"bad name\": [x]}\n",
                "staticPodURLHeader",
                "header name",
            ),
            (
                "staticPodURLHeader: {X-A: [\"line\\nbreak\"]}\n",
                "staticPodURLHeader",
                "header value",
            ),
            (
                "runtime: simulated\nstaticPodURL: http://h/\nnodes: [{name: sim-1}]\n",
                "staticPodURL",
                "fleet",
            ),
        ] {
            let (refused, reason) = refusal(yaml);
            assert_eq!(refused, field, "{yaml}");
            assert!(reason.contains(says), "{yaml}: {reason}");
        }
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
    fn system_cgroups_must_be_absolute_and_the_systems_not_the_root() {
        let (field, reason) = refusal("runtimeCgroups: system.slice/containerd.service\n");
        assert_eq!(field, "runtimeCgroups");
        assert!(reason.contains("absolute"), "{reason}");
        let (field, reason) = refusal("systemCgroups: /\n");
        assert_eq!(field, "systemCgroups");
        assert!(reason.contains("cannot be root"), "{reason}");
        let (field, _) = refusal("kubeletCgroups: /a/../b\n");
        assert_eq!(field, "kubeletCgroups");
        let config = Config::parse(
            "kubeletCgroups: /\nruntimeCgroups: /system.slice/containerd.service\n",
            Source::Embedded,
        )
        .expect("valid");
        assert_eq!(config.kubelet_cgroups.as_deref(), Some("/"));
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

    #[test]
    fn container_log_rotation_settings_are_refused_with_the_kubelets_limits() {
        let defaults = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(
            (
                defaults.container_log_max_bytes(),
                defaults.container_log_max_files,
                defaults.container_log_max_workers,
                defaults.container_log_monitor_interval.0.as_secs(),
            ),
            (Some(10 << 20), 5, 1, 10)
        );
        let cases = [
            (
                "containerLogMaxSize: 10MB\n",
                "containerLogMaxSize",
                "unknown suffix",
            ),
            (
                "containerLogMaxSize: '1.5'\n",
                "containerLogMaxSize",
                "whole number",
            ),
            (
                "containerLogMaxFiles: 1\n",
                "containerLogMaxFiles",
                "greater than 1",
            ),
            (
                "containerLogMaxWorkers: 0\n",
                "containerLogMaxWorkers",
                "greater than or equal to 1",
            ),
            (
                "containerLogMonitorInterval: 2s\n",
                "containerLogMonitorInterval",
                "greater than or equal to 3s",
            ),
        ];
        for (yaml, expected_field, expected_reason) in cases {
            let (field, reason) = refusal(yaml);
            assert_eq!(field, expected_field, "{yaml}");
            assert!(reason.contains(expected_reason), "{yaml}: {reason}");
        }
        let off = Config::parse("containerLogMaxSize: '-1'\n", Source::Embedded).expect("valid");
        assert_eq!(off.container_log_max_bytes(), None);
    }

    #[test]
    fn user_namespace_ids_per_pod_are_refused_with_the_kubelets_reasons() {
        for (ids, expected) in [
            ("65535", "must not be less than 65536"),
            ("98304", "must be a multiple of 65536"),
            ("4295032832", "must not be more than 4294967295"),
        ] {
            let yaml = format!("userNamespaces: {{idsPerPod: {ids}}}\n");
            let (field, reason) = refusal(&yaml);
            assert_eq!(field, "userNamespaces.idsPerPod", "{yaml}");
            assert!(reason.contains(expected), "{yaml}: {reason}");
        }
        for ids in ["0", "65536", "1048576"] {
            let yaml = format!("userNamespaces: {{idsPerPod: {ids}}}\n");
            Config::parse(&yaml, Source::Embedded).expect("valid");
        }
    }

    #[test]
    fn image_gc_thresholds_and_ages_are_refused_with_the_kubelets_reasons() {
        let defaults = Config::parse("maxPods: 110\n", Source::Embedded).expect("valid");
        assert_eq!(
            (
                defaults.image_gc_high_threshold_percent,
                defaults.image_gc_low_threshold_percent,
                defaults.image_minimum_gc_age.0.as_secs(),
                defaults.image_maximum_gc_age.0.as_secs(),
                defaults.image_gc_period.0.as_secs(),
            ),
            (85, 80, 120, 0, 300)
        );
        let cases = [
            (
                "imageGCHighThresholdPercent: 101\n",
                "imageGCHighThresholdPercent",
                "between 0 and 100",
            ),
            (
                "imageGCLowThresholdPercent: -1\n",
                "imageGCLowThresholdPercent",
                "between 0 and 100",
            ),
            (
                "imageGCLowThresholdPercent: 85\n",
                "imageGCLowThresholdPercent",
                "less than imageGCHighThresholdPercent (85)",
            ),
            (
                "imageMaximumGCAge: 1m\n",
                "imageMaximumGCAge",
                "greater than imageMinimumGCAge (2m0s)",
            ),
            ("imageGCPeriod: 0s\n", "imageGCPeriod", "greater than zero"),
        ];
        for (yaml, expected_field, expected_reason) in cases {
            let (field, reason) = refusal(yaml);
            assert_eq!(field, expected_field, "{yaml}");
            assert!(reason.contains(expected_reason), "{yaml}: {reason}");
        }
        let off = Config::parse(
            "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 0\nimageMaximumGCAge: 1h\n",
            Source::Embedded,
        );
        assert!(off.is_ok(), "{off:?}");
    }
}
