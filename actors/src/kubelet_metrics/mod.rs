//! The kubelet's own `/metrics` families that nodepulse measures as it works, with the names,
//! help texts, labels and buckets of kubelet 1.36 (`pkg/kubelet/metrics`, client-go's
//! `rest_client_*`, the volume manager's `storage_operation_duration_seconds`, the certificate
//! managers'): one process-wide set, as the kubelet's legacy registry is, recorded where the
//! work happens (the CRI client, the PLEG, the pod workers, the eviction manager, the volume
//! manager, the API client, certificate rotation) and written by the kubelet API's `/metrics`.
//! Families read from state at each scrape (running pods, volumes, process figures) are the
//! kubelet API's, not kept here.

mod recording;
mod store;

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::SystemTime,
};

pub use recording::{
    PodStarts, RelistTimer, pod_forgotten, pod_phase, relist_started, storage_operation,
};
pub use store::{DEFAULT_BUCKETS, Desc, Histograms, Observed, Values};

/// The kubelet's `podStartupDurationBuckets`.
const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// `ExponentialBuckets(.005, 2.5, 14)`: the runtime operations' buckets.
const RUNTIME_BUCKETS: &[f64] = &[
    0.005,
    0.0125,
    0.03125,
    0.078125,
    0.1953125,
    0.48828125,
    1.220703125,
    3.0517578125,
    7.62939453125,
    19.073486328125,
    47.6837158203125,
    119.20928955078125,
    298.0232238769531,
    745.0580596923828,
];

/// The volume operations' buckets (`pkg/volume/util/metrics.go`).
const STORAGE_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

/// client-go's `rest_client_request_duration_seconds` buckets.
const REST_CLIENT_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

const fn desc(
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    labels: &'static [&'static str],
) -> Desc {
    Desc {
        name,
        help,
        kind,
        labels,
    }
}

/// When a rotated certificate expires, read at each scrape.
pub type Expiry = Arc<dyn Fn() -> Option<SystemTime> + Send + Sync>;

/// The families measured as work happens.
pub struct KubeletMetrics {
    pub pleg_relist_duration: Histograms,
    pub pleg_relist_interval: Histograms,
    pub pleg_last_seen: Values,
    pub pod_worker_duration: Histograms,
    pub pod_start_duration: Histograms,
    pub runtime_operations: Values,
    pub runtime_operations_errors: Values,
    pub runtime_operations_duration: Histograms,
    pub evictions: Values,
    pub storage_operation_duration: Histograms,
    pub rest_client_requests: Values,
    pub rest_client_request_duration: Histograms,
    pub client_renew_errors: Values,
    pub server_renew_errors: Values,
    client_expiry: Mutex<Option<Expiry>>,
    server_expiry: Mutex<Option<Expiry>>,
}

/// The process's families.
pub static KUBELET_METRICS: KubeletMetrics = KubeletMetrics {
    pleg_relist_duration: Histograms::new(
        desc(
            "kubelet_pleg_relist_duration_seconds",
            "[ALPHA] Duration in seconds for relisting pods in PLEG.",
            "histogram",
            &[],
        ),
        DEFAULT_BUCKETS,
    ),
    pleg_relist_interval: Histograms::new(
        desc(
            "kubelet_pleg_relist_interval_seconds",
            "[ALPHA] Interval in seconds between relisting in PLEG.",
            "histogram",
            &[],
        ),
        DEFAULT_BUCKETS,
    ),
    pleg_last_seen: Values::new(desc(
        "kubelet_pleg_last_seen_seconds",
        "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
        "gauge",
        &[],
    )),
    pod_worker_duration: Histograms::new(
        desc(
            "kubelet_pod_worker_duration_seconds",
            "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
            "histogram",
            &["operation_type"],
        ),
        DEFAULT_BUCKETS,
    ),
    pod_start_duration: Histograms::new(
        desc(
            "kubelet_pod_start_duration_seconds",
            "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            "histogram",
            &[],
        ),
        POD_START_BUCKETS,
    ),
    runtime_operations: Values::new(desc(
        "kubelet_runtime_operations_total",
        "[ALPHA] Cumulative number of runtime operations by operation type.",
        "counter",
        &["operation_type"],
    )),
    runtime_operations_errors: Values::new(desc(
        "kubelet_runtime_operations_errors_total",
        "[ALPHA] Cumulative number of runtime operation errors by operation type.",
        "counter",
        &["operation_type"],
    )),
    runtime_operations_duration: Histograms::new(
        desc(
            "kubelet_runtime_operations_duration_seconds",
            "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
            "histogram",
            &["operation_type"],
        ),
        RUNTIME_BUCKETS,
    ),
    evictions: Values::new(desc(
        "kubelet_evictions",
        "[ALPHA] Cumulative number of pod evictions by eviction signal",
        "counter",
        &["eviction_signal"],
    )),
    storage_operation_duration: Histograms::new(
        desc(
            "storage_operation_duration_seconds",
            "[ALPHA] Storage operation duration",
            "histogram",
            &["volume_plugin", "operation_name", "status", "migrated"],
        ),
        STORAGE_BUCKETS,
    ),
    rest_client_requests: Values::new(desc(
        "rest_client_requests_total",
        "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
        "counter",
        &["code", "host", "method"],
    )),
    rest_client_request_duration: Histograms::new(
        desc(
            "rest_client_request_duration_seconds",
            "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
            "histogram",
            &["host", "verb"],
        ),
        REST_CLIENT_BUCKETS,
    ),
    client_renew_errors: Values::new(desc(
        "kubelet_certificate_manager_client_expiration_renew_errors",
        "[ALPHA] Counter of certificate renewal errors.",
        "counter",
        &[],
    )),
    server_renew_errors: Values::new(desc(
        "kubelet_server_expiration_renew_errors",
        "[ALPHA] Counter of certificate renewal errors.",
        "counter",
        &[],
    )),
    client_expiry: Mutex::new(None),
    server_expiry: Mutex::new(None),
};

/// Which rotated certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certificate {
    Client,
    Serving,
}

impl KubeletMetrics {
    /// The counters and gauges, and the histograms, to write.
    pub fn values(&self) -> [&Values; 7] {
        [
            &self.pleg_last_seen,
            &self.runtime_operations,
            &self.runtime_operations_errors,
            &self.evictions,
            &self.rest_client_requests,
            &self.client_renew_errors,
            &self.server_renew_errors,
        ]
    }

    pub fn histograms(&self) -> [&Histograms; 7] {
        [
            &self.pleg_relist_duration,
            &self.pleg_relist_interval,
            &self.pod_worker_duration,
            &self.pod_start_duration,
            &self.runtime_operations_duration,
            &self.storage_operation_duration,
            &self.rest_client_request_duration,
        ]
    }

    fn expiry_slot(&self, certificate: Certificate) -> &Mutex<Option<Expiry>> {
        match certificate {
            Certificate::Client => &self.client_expiry,
            Certificate::Serving => &self.server_expiry,
        }
    }

    /// A certificate is rotated from now on: its TTL gauge is served, and its renewal error
    /// counter from 0 (the kubelet registers both with the certificate manager).
    pub fn rotating(&self, certificate: Certificate, expiry: Expiry) {
        *self
            .expiry_slot(certificate)
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(expiry);
        self.renew_errors(certificate).add(&[], 0.0);
    }

    /// The renewal error counter of `certificate`.
    pub fn renew_errors(&self, certificate: Certificate) -> &Values {
        match certificate {
            Certificate::Client => &self.client_renew_errors,
            Certificate::Serving => &self.server_renew_errors,
        }
    }

    /// When the rotated `certificate` expires: `None` when it is not rotated, `Some(None)`
    /// when it is but none is held (the kubelet's gauge reads +Inf then).
    pub fn expiry(&self, certificate: Certificate) -> Option<Option<SystemTime>> {
        let slot = self
            .expiry_slot(certificate)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().map(|expiry| expiry())
    }
}

/// The kubelet's `operation_type` of a CRI method (`ListPodSandbox` → `list_podsandbox`,
/// `ImageFsInfo` → `image_fs_info`), as its instrumented runtime service names them.
pub fn runtime_operation(method: &str) -> String {
    let method = method.replace("PodSandbox", "Podsandbox");
    let mut name = String::with_capacity(method.len() + 4);
    for (index, character) in method.chars().enumerate() {
        if character.is_ascii_uppercase() {
            if index > 0 {
                name.push('_');
            }
            name.push(character.to_ascii_lowercase());
        } else {
            name.push(character);
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_methods_are_named_as_the_kubelets_instrumented_service_names_them() {
        for (method, kubelet) in [
            ("ListPodSandbox", "list_podsandbox"),
            ("PodSandboxStatus", "podsandbox_status"),
            ("RunPodSandbox", "run_podsandbox"),
            ("ListPodSandboxStats", "list_podsandbox_stats"),
            ("ImageFsInfo", "image_fs_info"),
            ("ExecSync", "exec_sync"),
            ("UpdateRuntimeConfig", "update_runtime_config"),
            ("Version", "version"),
            ("GetContainerEvents", "get_container_events"),
        ] {
            assert_eq!(runtime_operation(method), kubelet, "{method}");
        }
    }
}
