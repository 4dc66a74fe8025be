//! What each of a node's actors is told, derived from the resolved settings: the supervisor's
//! policies, NodeStatus's setters, the eviction thresholds. Pure translation; nothing here
//! starts anything.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Taint;
use nodepulse_actors::{
    eviction::{
        EvictionSettings, Signal, Threshold, ThresholdConfig, ThresholdValue, parse_thresholds,
    },
    lease::LeaseSettings,
    node_status::{
        NodeStatusSettings, registration::RegistrationSettings, setters::StatusSettings,
    },
    pods::ip_pool::Cidr,
    quantity::parse_quantity,
    runtime_probe::RuntimeProbeSettings,
    volume_manager::{PodDirs, VolumeManagerSettings},
};
use nodepulse_supervisor::{BackoffPolicy, IntensityPolicy, SupervisorConfig};

use crate::config::{Config, Settings};

/// The longest the first status sync waits for the runtime probe's first answer.
const FIRST_RUNTIME_WAIT: Duration = Duration::from_secs(5);

/// The supervisor settings the configuration describes, for node `node`.
pub fn supervisor_config(config: &Config, node: &str) -> SupervisorConfig {
    let supervision = &config.supervision;
    let mut supervisor = SupervisorConfig::new(node);
    supervisor.backoff = BackoffPolicy {
        initial: supervision.backoff.initial.into(),
        max: supervision.backoff.max.into(),
        multiplier: supervision.backoff.multiplier,
        jitter: supervision.backoff.jitter,
        reset_after: supervision.backoff.reset_after.into(),
    };
    supervisor.intensity = IntensityPolicy {
        max_restarts: supervision.max_restarts(),
        window: supervision.restart_window.into(),
    };
    supervisor.liveness_timeout = supervision.liveness_timeout.into();
    supervisor.liveness_interval = supervision.liveness_interval.into();
    supervisor
}

pub fn lease_settings(settings: &Settings) -> LeaseSettings {
    LeaseSettings {
        node: settings.node_name.clone(),
        lease_duration_seconds: settings.config.node_lease_duration_seconds,
    }
}

/// The volume manager's: pods' volumes under `rootDir` (as nodepulse sees it, under
/// `hostRoot`), refreshed every `syncFrequency`.
pub fn volume_manager_settings(settings: &Settings) -> VolumeManagerSettings {
    VolumeManagerSettings {
        node_name: settings.node_name.clone(),
        dirs: PodDirs::new(settings.config.root_dir_on_host()),
        sync_period: settings.config.sync_frequency.into(),
        // A node of its own fetches as the kubelet does; a fleet's nodes are bounded by the
        // wiring (`NodeActors::volume_fetches_at_once`).
        fetches_at_once: None,
    }
}

pub fn runtime_probe_settings(config: &Config) -> RuntimeProbeSettings {
    RuntimeProbeSettings {
        probe_period: config.runtime_probe_period.0,
        request_timeout: config.runtime_request_timeout.0,
    }
}

/// The range simulated pods take addresses from until the Node has a `spec.podCIDR`.
pub fn fallback_pod_cidr(config: &Config) -> Cidr {
    // Validated at load time.
    Cidr::parse(&config.pod_cidr)
        .unwrap_or_else(|_| Cidr::parse("10.88.0.0/16").expect("a valid CIDR"))
}

/// The image manager's settings of a validated configuration.
pub fn image_gc_settings(config: &Config) -> nodepulse_actors::image_gc::ImageGcSettings {
    let percent = |value: i32| u8::try_from(value.clamp(0, 100)).unwrap_or(100);
    nodepulse_actors::image_gc::ImageGcSettings {
        high_threshold_percent: percent(config.image_gc_high_threshold_percent),
        low_threshold_percent: percent(config.image_gc_low_threshold_percent),
        minimum_age: config.image_minimum_gc_age.0,
        maximum_age: config.image_maximum_gc_age.0,
        period: config.image_gc_period.0,
    }
}

/// The container log manager's settings; `None` when rotation is off (a negative
/// `containerLogMaxSize`).
pub fn log_rotation_settings(
    config: &Config,
) -> Option<nodepulse_actors::log_rotation::LogRotationSettings> {
    let at_least = |value: i32, least: usize| usize::try_from(value).unwrap_or(least).max(least);
    Some(nodepulse_actors::log_rotation::LogRotationSettings {
        max_size: config.container_log_max_bytes()?,
        max_files: at_least(config.container_log_max_files, 2),
        max_workers: at_least(config.container_log_max_workers, 1),
        monitor_interval: config.container_log_monitor_interval.0,
    })
}

/// The eviction settings of a validated configuration.
pub fn eviction_settings(config: &Config) -> EvictionSettings {
    let grace = config
        .eviction_soft_grace_period
        .iter()
        .map(|(signal, duration)| (signal.clone(), duration.0))
        .collect();
    let thresholds = parse_thresholds(
        &ThresholdConfig {
            hard: &config.eviction_hard,
            soft: &config.eviction_soft,
            soft_grace_period: &grace,
            minimum_reclaim: &config.eviction_minimum_reclaim,
        },
        true,
    )
    .unwrap_or_else(|error| {
        // Validation refused this before anything started; reaching here is a bug, not input.
        tracing::error!(%error, "eviction thresholds invalid after validation; none applied");
        Vec::new()
    });
    EvictionSettings {
        thresholds,
        housekeeping_interval: config.housekeeping_interval.0,
        pressure_transition_period: config.eviction_pressure_transition_period.0,
        runtime_request_timeout: config.runtime_request_timeout.0,
    }
}

/// The configured hard threshold of `signal`, which allocatable holds back.
fn hard_threshold(thresholds: &[Threshold], signal: Signal) -> Option<ThresholdValue> {
    thresholds
        .iter()
        .find(|threshold| threshold.hard && threshold.signal == signal)
        .map(|threshold| threshold.value)
}

fn reserved(config: &Config) -> BTreeMap<String, f64> {
    let mut total = BTreeMap::new();
    for (resource, quantity) in config.system_reserved.iter().chain(&config.kube_reserved) {
        // Validated at load time; an unparsable value cannot reach here.
        let amount = parse_quantity(quantity).unwrap_or(0.0);
        *total.entry(resource.clone()).or_insert(0.0) += amount;
    }
    total
}

pub fn node_status_settings(settings: &Settings) -> NodeStatusSettings {
    let config = &settings.config;
    let thresholds = eviction_settings(config).thresholds;
    NodeStatusSettings {
        node_name: settings.node_name.clone(),
        register_node: config.register_node,
        registration: Arc::new(RegistrationSettings {
            node_labels: config.node_labels.clone(),
            taints: config
                .register_with_taints
                .iter()
                .map(|taint| Taint {
                    key: taint.key.clone(),
                    value: taint.value.clone(),
                    effect: taint.effect.clone(),
                    time_added: None,
                })
                .collect(),
            provider_id: config.provider_id.clone(),
            controller_attach_detach: config.enable_controller_attach_detach,
        }),
        status: Arc::new(StatusSettings {
            max_pods: config.max_pods,
            pods_per_core: config.pods_per_core,
            reserved: reserved(config),
            hard_eviction_memory: hard_threshold(&thresholds, Signal::MemoryAvailable),
            hard_eviction_nodefs: hard_threshold(&thresholds, Signal::NodefsAvailable),
            node_ips: config
                .node_ip
                .iter()
                .filter_map(|ip| ip.parse::<IpAddr>().ok())
                .collect(),
            port: i32::from(config.port),
            agent_version: format!("v{}", env!("CARGO_PKG_VERSION")),
            runtime_down_after: config.container_runtime_down_after.into(),
        }),
        update_frequency: config.node_status_update_frequency.into(),
        report_frequency: config.report_frequency(),
        first_runtime_wait: Some(FIRST_RUNTIME_WAIT),
        random_tick_phase: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn resolved(yaml: &str) -> StatusSettings {
        let config = Config::parse(yaml, Source::Embedded).expect("valid");
        let settings = Settings {
            config,
            node_name: "n".into(),
            kubeconfig: None,
            standalone: false,
            bootstrap: None,
        };
        Arc::unwrap_or_clone(node_status_settings(&settings).status)
    }

    #[test]
    fn allocatable_holds_back_the_configured_hard_thresholds() {
        let defaults = resolved("maxPods: 110\n");
        assert_eq!(
            defaults.hard_eviction_memory,
            Some(ThresholdValue::Quantity(100 << 20))
        );
        assert_eq!(
            defaults.hard_eviction_nodefs,
            Some(ThresholdValue::Percentage(10.0))
        );
        let configured = resolved("evictionHard:\n  memory.available: 1Gi\n");
        assert_eq!(
            configured.hard_eviction_memory,
            Some(ThresholdValue::Quantity(1 << 30))
        );
        assert_eq!(
            configured.hard_eviction_nodefs, None,
            "a partial evictionHard replaces the defaults"
        );
    }
}
