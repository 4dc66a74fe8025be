//! The kubelet API's requests for `/metrics`: how many, by path class (`containerLogs`,
//! `exec`, `healthz`, …, `other` for paths no route serves) and HTTP status code, as the
//! kubelet counts `kubelet_http_requests_total` by path.

use std::sync::LazyLock;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

pub static KUBELET_API_METRICS: LazyLock<KubeletApiMetrics> =
    LazyLock::new(KubeletApiMetrics::default);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Request {
    path: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Default)]
pub struct KubeletApiMetrics {
    requests: Family<Request, Counter>,
}

/// The class a path is counted under: its first segment when a route serves it.
pub fn path_class(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    const CLASSES: &[&str] = &[
        "healthz",
        "pods",
        "runningpods",
        "containerLogs",
        "exec",
        "attach",
        "portForward",
        "run",
        "configz",
        "stats",
        "metrics",
        "logs",
    ];
    CLASSES
        .iter()
        .find(|class| **class == first)
        .copied()
        .unwrap_or("other")
}

impl KubeletApiMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nodepulse_kubelet_api_requests",
            "Requests to the kubelet API (port 10250) by path class and HTTP status code.",
            self.requests.clone(),
        );
    }

    pub fn request(&self, path: &str, code: u16) {
        self.requests
            .get_or_create(&Request {
                path: path_class(path),
                code,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_counted_by_class_and_code() {
        let metrics = KubeletApiMetrics::default();
        metrics.request("/containerLogs/ns/p/c", 200);
        metrics.request("/containerLogs/ns/q/c", 200);
        metrics.request("/no/such/path", 404);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(
                "nodepulse_kubelet_api_requests_total{path=\"containerLogs\",code=\"200\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("nodepulse_kubelet_api_requests_total{path=\"other\",code=\"404\"} 1"),
            "{text}"
        );
    }
}
