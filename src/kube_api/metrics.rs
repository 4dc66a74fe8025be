//! What the API clients did, for `/metrics`: every request's latency by Kubernetes verb and
//! resource (measured in a tower layer under kube-rs, so no adapter can forget it, as client-go
//! measures `rest_client_request_duration_seconds`), node status updates, and Lease renewals
//! with the age of the last renewTime written. Process-wide, like client-go's registry: one
//! daemon process runs one node, and a test process's nodes simply add up.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{LazyLock, Mutex, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use jiff::Timestamp;

/// The process's API metrics.
pub static API_METRICS: LazyLock<ApiMetrics> = LazyLock::new(ApiMetrics::default);

/// client-go's buckets for `rest_client_request_duration_seconds`.
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Default, Clone)]
struct Histogram {
    /// Observations ≤ each bound (not cumulative; summed when rendered).
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(index) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.buckets[index] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Default)]
struct Figures {
    /// (verb, resource) → latency.
    durations: BTreeMap<(String, String), Histogram>,
    /// (verb, resource, code) → requests; code is the HTTP status, or `<error>` without one.
    requests: BTreeMap<(String, String, String), u64>,
    /// result → node status PATCHes.
    node_status_updates: BTreeMap<&'static str, u64>,
    /// result → Lease writes (create or renew).
    lease_renewals: BTreeMap<&'static str, u64>,
    last_renew_time: Option<Timestamp>,
    /// When the API server stopped answering (see `reachability`); `None` while it answers.
    api_unreachable_since: Option<Timestamp>,
}

/// The figures, behind one lock: a request records in well under a microsecond.
#[derive(Default)]
pub struct ApiMetrics(Mutex<Figures>);

fn result(ok: bool) -> &'static str {
    if ok { "success" } else { "error" }
}

impl ApiMetrics {
    fn figures(&self) -> std::sync::MutexGuard<'_, Figures> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn observe_request(&self, verb: &str, resource: &str, code: Option<u16>, took: Duration) {
        let mut figures = self.figures();
        figures
            .durations
            .entry((verb.to_owned(), resource.to_owned()))
            .or_default()
            .observe(took.as_secs_f64());
        let code = code.map_or_else(|| "<error>".to_owned(), |code| code.to_string());
        *figures
            .requests
            .entry((verb.to_owned(), resource.to_owned(), code))
            .or_default() += 1;
    }

    pub fn node_status_update(&self, ok: bool) {
        *self
            .figures()
            .node_status_updates
            .entry(result(ok))
            .or_default() += 1;
    }

    /// A Lease write; `renew_time` is the renewTime the server accepted, `None` on failure.
    pub fn lease_renewal(&self, renew_time: Option<Timestamp>) {
        let mut figures = self.figures();
        *figures
            .lease_renewals
            .entry(result(renew_time.is_some()))
            .or_default() += 1;
        if let Some(renewed) = renew_time {
            figures.last_renew_time = Some(
                figures
                    .last_renew_time
                    .map_or(renewed, |last| last.max(renewed)),
            );
        }
    }

    /// The API server stopped answering at `since`, or (`None`) answers.
    pub fn api_unreachable_since(&self, since: Option<Timestamp>) {
        self.figures().api_unreachable_since = since;
    }

    /// When the API server stopped answering, if it does not answer now.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        self.figures().api_unreachable_since
    }

    /// The families in the Prometheus text format; `now` dates the Lease's lag.
    pub fn render(&self, out: &mut String, now: Timestamp) {
        let figures = self.figures();
        header(
            out,
            "nodepulse_rest_client_request_duration_seconds",
            "histogram",
            "API request latency by Kubernetes verb and resource (until the response headers; a watch until it is established).",
        );
        for ((verb, resource), histogram) in &figures.durations {
            let labels = format!("verb=\"{verb}\",resource=\"{resource}\"");
            let mut cumulative = 0;
            for (bound, count) in BUCKETS.iter().zip(histogram.buckets) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "nodepulse_rest_client_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "nodepulse_rest_client_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}\n\
                 nodepulse_rest_client_request_duration_seconds_sum{{{labels}}} {}\n\
                 nodepulse_rest_client_request_duration_seconds_count{{{labels}}} {}",
                histogram.count, histogram.sum, histogram.count
            );
        }
        header(
            out,
            "nodepulse_rest_client_requests_total",
            "counter",
            "API requests by Kubernetes verb, resource and HTTP status code (<error> when no response came).",
        );
        for ((verb, resource, code), count) in &figures.requests {
            let _ = writeln!(
                out,
                "nodepulse_rest_client_requests_total{{verb=\"{verb}\",resource=\"{resource}\",code=\"{code}\"}} {count}"
            );
        }
        header(
            out,
            "nodepulse_node_status_update_total",
            "counter",
            "Node status PATCHes sent, by result.",
        );
        for (result, count) in &figures.node_status_updates {
            let _ = writeln!(
                out,
                "nodepulse_node_status_update_total{{result=\"{result}\"}} {count}"
            );
        }
        header(
            out,
            "nodepulse_lease_renewals_total",
            "counter",
            "Writes of the node's Lease (create or renew), by result.",
        );
        for (result, count) in &figures.lease_renewals {
            let _ = writeln!(
                out,
                "nodepulse_lease_renewals_total{{result=\"{result}\"}} {count}"
            );
        }
        header(
            out,
            "nodepulse_api_unreachable_since_seconds",
            "gauge",
            "Unix time since which no API request got an answer; 0 while the API server answers.",
        );
        let since = figures
            .api_unreachable_since
            .map_or(0.0, |since| since.as_millisecond() as f64 / 1000.0);
        let _ = writeln!(out, "nodepulse_api_unreachable_since_seconds {since}");
        if let Some(renewed) = figures.last_renew_time {
            header(
                out,
                "nodepulse_lease_renew_lag_seconds",
                "gauge",
                "Seconds since the renewTime of the last Lease write the API server accepted; past leaseDurationSeconds the node-lifecycle controller marks the node Unknown.",
            );
            let lag = (now.as_millisecond() - renewed.as_millisecond()).max(0) as f64 / 1000.0;
            let _ = writeln!(out, "nodepulse_lease_renew_lag_seconds {lag}");
        }
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The Kubernetes verb and resource (`pods/status`) of a request, as RBAC and the API server's
/// own metrics name them. Object names are left out, so the labels stay few.
pub fn classify(method: &http::Method, uri: &http::Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] | ["apis", _, _version, rest @ ..] => rest,
        _ => return (method_verb(method, false, false), uri.path().to_owned()),
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, named) = match rest {
        [plural] => ((*plural).to_owned(), false),
        [plural, _name] => ((*plural).to_owned(), true),
        [plural, _name, sub, ..] => (format!("{plural}/{sub}"), true),
        [] => (String::new(), false),
    };
    let watch = uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    (method_verb(method, named, watch), resource)
}

fn method_verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "other",
    }
}

/// The tower layer that times every request of a kube-rs client into [`API_METRICS`].
#[derive(Clone, Copy, Default)]
pub struct TimingLayer;

impl<S> tower::Layer<S> for TimingLayer {
    type Service = Timing<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Timing { inner }
    }
}

#[derive(Clone)]
pub struct Timing<S> {
    inner: S,
}

impl<S, B, R> tower::Service<http::Request<B>> for Timing<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (verb, resource) = classify(request.method(), request.uri());
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = result
                .as_ref()
                .ok()
                .map(|response| response.status().as_u16());
            API_METRICS.observe_request(verb, &resource, code, started.elapsed());
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classified(method: &str, uri: &str) -> (&'static str, String) {
        classify(
            &method.parse().expect("a method"),
            &uri.parse().expect("a uri"),
        )
    }

    #[test]
    fn requests_are_named_by_kubernetes_verb_and_resource() {
        assert_eq!(
            classified("PATCH", "/api/v1/nodes/n1/status"),
            ("patch", "nodes/status".into())
        );
        assert_eq!(
            classified(
                "PATCH",
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
            ),
            ("patch", "leases".into())
        );
        assert_eq!(
            classified("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"),
            ("list", "pods".into())
        );
        assert_eq!(
            classified(
                "GET",
                "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&watch=true&resourceVersion=5"
            ),
            ("watch", "nodes".into())
        );
        assert_eq!(
            classified("POST", "/api/v1/namespaces/default/events"),
            ("create", "events".into())
        );
        assert_eq!(
            classified("DELETE", "/api/v1/namespaces/default/pods/p"),
            ("delete", "pods".into())
        );
        assert_eq!(
            classified("GET", "/api/v1/namespaces/default"),
            ("get", "namespaces".into())
        );
        assert_eq!(classified("GET", "/version"), ("list", "/version".into()));
    }

    #[test]
    fn a_histogram_counts_each_observation_in_its_bucket_and_above() {
        let metrics = ApiMetrics::default();
        metrics.observe_request("get", "nodes", Some(200), Duration::from_millis(3));
        metrics.observe_request("get", "nodes", Some(404), Duration::from_millis(300));
        let mut out = String::new();
        metrics.render(&mut out, Timestamp::now());
        let line = |prefix: &str| {
            out.lines()
                .find(|line| line.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {out}"))
                .rsplit(' ')
                .next()
                .expect("a value")
                .to_owned()
        };
        let bucket = "nodepulse_rest_client_request_duration_seconds_bucket{verb=\"get\",resource=\"nodes\",";
        assert_eq!(line(&format!("{bucket}le=\"0.005\"}}")), "1");
        assert_eq!(line(&format!("{bucket}le=\"0.25\"}}")), "1");
        assert_eq!(line(&format!("{bucket}le=\"0.5\"}}")), "2");
        assert_eq!(line(&format!("{bucket}le=\"+Inf\"}}")), "2");
        assert_eq!(
            line(
                "nodepulse_rest_client_requests_total{verb=\"get\",resource=\"nodes\",code=\"404\"}"
            ),
            "1"
        );
    }

    #[test]
    fn the_lease_lag_is_the_age_of_the_newest_accepted_renew_time() {
        let metrics = ApiMetrics::default();
        let renewed: Timestamp = "2026-11-29T22:00:00Z".parse().expect("a time");
        metrics.lease_renewal(Some(renewed));
        metrics.lease_renewal(None);
        let mut out = String::new();
        metrics.render(&mut out, renewed + jiff::SignedDuration::from_millis(2500));
        assert!(
            out.contains("nodepulse_lease_renew_lag_seconds 2.5\n"),
            "{out}"
        );
        assert!(out.contains("nodepulse_lease_renewals_total{result=\"error\"} 1\n"));
        assert!(out.contains("nodepulse_lease_renewals_total{result=\"success\"} 1\n"));
    }
}
