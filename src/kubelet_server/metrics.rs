//! The kubelet API's figures: its requests for `/metrics`, by path class (`containerLogs`,
//! `exec`, `healthz`, …, `other` for paths no route serves) and HTTP status code, as the
//! kubelet counts `kubelet_http_requests_total` by path; and what it has open right now (TLS
//! connections, log streams and exec/attach/port-forward relays), counted by an [`Open`] guard
//! each holds for as long as it lasts, for `/metrics` and the debug endpoint's `/debug/kubelet-api`.

use std::sync::LazyLock;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

pub static KUBELET_API_METRICS: LazyLock<KubeletApiMetrics> =
    LazyLock::new(KubeletApiMetrics::default);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Request {
    path: &'static str,
    code: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StreamLabels {
    kind: &'static str,
}

/// The streams counted while open, by the path class that serves them.
pub const STREAM_KINDS: [&str; 4] = ["containerLogs", "exec", "attach", "portForward"];

#[derive(Debug, Clone, Default)]
pub struct KubeletApiMetrics {
    requests: Family<Request, Counter>,
    connections: Gauge,
    streams: Family<StreamLabels, Gauge>,
}

/// One open connection or stream: counted until dropped.
#[derive(Debug)]
pub struct Open(Gauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
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
        registry.register(
            "nodepulse_kubelet_api_connections",
            "TLS connections to the kubelet API open now.",
            self.connections.clone(),
        );
        registry.register(
            "nodepulse_kubelet_api_streams",
            "Streams the kubelet API serves now: container logs being read, exec, attach and port-forward relays.",
            self.streams.clone(),
        );
    }

    /// A TLS connection, open until the guard is dropped.
    pub fn connection(&self) -> Open {
        self.connections.inc();
        Open(self.connections.clone())
    }

    /// A stream of `kind` (one of [`STREAM_KINDS`]), open until the guard is dropped.
    pub fn stream(&self, kind: &'static str) -> Open {
        let gauge = self.streams.get_or_create(&StreamLabels { kind }).clone();
        gauge.inc();
        Open(gauge)
    }

    /// What is open now: `{"connections": n, "streams": {"containerLogs": n, …}}`.
    pub fn in_flight(&self) -> serde_json::Value {
        let streams: serde_json::Map<String, serde_json::Value> = STREAM_KINDS
            .iter()
            .map(|kind| {
                let open = self.streams.get_or_create(&StreamLabels { kind }).get();
                ((*kind).to_owned(), open.into())
            })
            .collect();
        serde_json::json!({"connections": self.connections.get(), "streams": streams})
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
    fn connections_and_streams_are_counted_while_their_guards_live() {
        let metrics = KubeletApiMetrics::default();
        let connection = metrics.connection();
        let (logs, exec) = (metrics.stream("containerLogs"), metrics.stream("exec"));
        let second = metrics.stream("containerLogs");
        assert_eq!(
            metrics.in_flight(),
            serde_json::json!({"connections": 1, "streams": {
                "containerLogs": 2, "exec": 1, "attach": 0, "portForward": 0}})
        );
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("nodepulse_kubelet_api_streams{kind=\"containerLogs\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("nodepulse_kubelet_api_connections 1"),
            "{text}"
        );
        drop((connection, logs, exec, second));
        assert_eq!(
            metrics.in_flight(),
            serde_json::json!({"connections": 0, "streams": {
                "containerLogs": 0, "exec": 0, "attach": 0, "portForward": 0}})
        );
    }

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
