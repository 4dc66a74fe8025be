//! What the API clients did, for `/metrics`: every request's latency by Kubernetes verb and
//! resource (measured in a tower layer under kube-rs, so no adapter can forget it, as client-go
//! measures `rest_client_request_duration_seconds`), node status updates, and Lease renewals
//! with the age of the last renewTime written. Process-wide, like client-go's registry: one
//! daemon process runs one node, and a test process's nodes simply add up. The families are
//! prometheus-client's; [`ApiMetrics::register`] adds them to the daemon's registry.

use std::{
    sync::{Arc, LazyLock, Mutex, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use jiff::Timestamp;
use nodepulse_actors::kubelet_metrics::KUBELET_METRICS;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::Counter,
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::Histogram,
    },
    registry::Registry,
};

/// The process's API metrics.
pub static API_METRICS: LazyLock<ApiMetrics> = LazyLock::new(ApiMetrics::default);

/// client-go's buckets for `rest_client_request_duration_seconds`.
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Request {
    verb: String,
    resource: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestResult {
    verb: String,
    resource: String,
    /// The HTTP status, or `<error>` when no response came.
    code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Outcome {
    result: &'static str,
}

fn outcome(ok: bool) -> Outcome {
    Outcome {
        result: if ok { "success" } else { "error" },
    }
}

/// What became of a recorded Event (`events::sink`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EventOutcome {
    pub outcome: &'static str,
}

impl EventOutcome {
    /// Written (created or its count PATCHed).
    pub const WRITTEN: Self = Self { outcome: "written" };
    /// Dropped by the correlator's spam filter.
    pub const SPAM_FILTERED: Self = Self {
        outcome: "spam_filtered",
    };
    /// Dropped: the queues were full.
    pub const QUEUE_FULL: Self = Self {
        outcome: "queue_full",
    };
    /// Answered with an error, or no answer after every try.
    pub const FAILED: Self = Self { outcome: "failed" };
}

type Latencies = Family<Request, Histogram, fn() -> Histogram>;

/// The families, shared by every clone (prometheus-client's metrics are handles).
#[derive(Debug, Clone)]
pub struct ApiMetrics {
    durations: Latencies,
    requests: Family<RequestResult, Counter>,
    node_status_updates: Family<Outcome, Counter>,
    lease_renewals: Family<Outcome, Counter>,
    last_renew_time: Arc<Mutex<Option<Timestamp>>>,
    /// When the API server stopped answering (see `reachability`); `None` while it answers.
    api_unreachable_since: Arc<Mutex<Option<Timestamp>>>,
    events: Family<EventOutcome, Counter>,
    event_write_retries: Counter,
    events_queued: Gauge,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        let events = Family::<EventOutcome, Counter>::default();
        // Every outcome is served from the start, at 0, so a rate over it has a series.
        for outcome in [
            EventOutcome::WRITTEN,
            EventOutcome::SPAM_FILTERED,
            EventOutcome::QUEUE_FULL,
            EventOutcome::FAILED,
        ] {
            drop(events.get_or_create(&outcome));
        }
        Self {
            durations: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
            requests: Family::default(),
            node_status_updates: Family::default(),
            lease_renewals: Family::default(),
            last_renew_time: Arc::default(),
            api_unreachable_since: Arc::default(),
            events,
            event_write_retries: Counter::default(),
            events_queued: Gauge::default(),
        }
    }
}

impl ApiMetrics {
    pub fn observe_request(&self, verb: &str, resource: &str, code: Option<u16>, took: Duration) {
        self.durations
            .get_or_create(&Request {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
            })
            .observe(took.as_secs_f64());
        let code = code.map_or_else(|| "<error>".to_owned(), |code| code.to_string());
        self.requests
            .get_or_create(&RequestResult {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                code,
            })
            .inc();
    }

    pub fn node_status_update(&self, ok: bool) {
        self.node_status_updates.get_or_create(&outcome(ok)).inc();
    }

    /// A Lease write; `renew_time` is the renewTime the server accepted, `None` on failure.
    pub fn lease_renewal(&self, renew_time: Option<Timestamp>) {
        self.lease_renewals
            .get_or_create(&outcome(renew_time.is_some()))
            .inc();
        if let Some(renewed) = renew_time {
            let mut last = self
                .last_renew_time
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *last = Some(last.map_or(renewed, |last| last.max(renewed)));
        }
    }

    /// A recorded Event came to `outcome`.
    pub fn event(&self, outcome: EventOutcome) {
        self.events.get_or_create(&outcome).inc();
    }

    /// How many Events came to `outcome` so far.
    #[cfg(test)]
    pub fn events(&self, outcome: EventOutcome) -> u64 {
        self.events.get_or_create(&outcome).get()
    }

    /// An Event write that got no answer is tried again.
    pub fn event_write_retried(&self) {
        self.event_write_retries.inc();
    }

    /// Events waiting in the queues now.
    pub fn events_queued(&self, queued: usize) {
        self.events_queued
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    /// The API server stopped answering at `since`, or (`None`) answers.
    pub fn api_unreachable_since(&self, since: Option<Timestamp>) {
        *self
            .api_unreachable_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = since;
    }

    /// When the API server stopped answering, if it does not answer now.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        *self
            .api_unreachable_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the families to `registry`; the Lease's lag is dated at each scrape.
    pub fn register(&self, registry: &mut Registry) {
        self.register_at(registry, None);
    }

    /// [`register`](Self::register), with the lag dated at `now` when given (tests).
    fn register_at(&self, registry: &mut Registry, now: Option<Timestamp>) {
        registry.register(
            "nodepulse_rest_client_request_duration_seconds",
            "API request latency by Kubernetes verb and resource (until the response headers; a watch until it is established).",
            self.durations.clone(),
        );
        registry.register(
            "nodepulse_rest_client_requests",
            "API requests by Kubernetes verb, resource and HTTP status code (<error> when no response came).",
            self.requests.clone(),
        );
        registry.register(
            "nodepulse_node_status_update",
            "Node status PATCHes sent, by result.",
            self.node_status_updates.clone(),
        );
        registry.register(
            "nodepulse_lease_renewals",
            "Writes of the node's Lease (create or renew), by result.",
            self.lease_renewals.clone(),
        );
        registry.register(
            "nodepulse_events",
            "Events recorded, by what became of them: written, spam_filtered, queue_full (dropped, 1,000 were waiting), failed (an error answer, or none after 12 tries).",
            self.events.clone(),
        );
        registry.register(
            "nodepulse_event_write_retries",
            "Event writes tried again after getting no answer (client-go's recorder: up to 12 tries, 10 s apart).",
            self.event_write_retries.clone(),
        );
        registry.register(
            "nodepulse_events_queued",
            "Events recorded and waiting for their turn to be written (one at a time per node).",
            self.events_queued.clone(),
        );
        registry.register_collector(Box::new(Unreachable(Arc::clone(
            &self.api_unreachable_since,
        ))));
        registry.register_collector(Box::new(LeaseLag {
            last_renew_time: Arc::clone(&self.last_renew_time),
            now,
        }));
    }
}

/// `nodepulse_api_unreachable_since_seconds`: 0 while the API server answers.
#[derive(Debug)]
struct Unreachable(Arc<Mutex<Option<Timestamp>>>);

impl Collector for Unreachable {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let since = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        #[allow(clippy::cast_precision_loss)] // milliseconds since 1970 fit an f64 exactly
        let seconds = since.map_or(0.0, |since| since.as_millisecond() as f64 / 1000.0);
        let metric = encoder.encode_descriptor(
            "nodepulse_api_unreachable_since_seconds",
            "Unix time since which no API request got an answer; 0 while the API server answers.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(seconds).encode(metric)
    }
}

/// `nodepulse_lease_renew_lag_seconds`, computed when scraped; absent before the first renewal.
#[derive(Debug)]
struct LeaseLag {
    last_renew_time: Arc<Mutex<Option<Timestamp>>>,
    /// Fixed in tests; the scrape's own time otherwise.
    now: Option<Timestamp>,
}

impl Collector for LeaseLag {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(renewed) = *self
            .last_renew_time
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        else {
            return Ok(());
        };
        let now = self.now.unwrap_or_else(Timestamp::now);
        #[allow(clippy::cast_precision_loss)] // milliseconds of a lag fit an f64 exactly
        let lag = (now.as_millisecond() - renewed.as_millisecond()).max(0) as f64 / 1000.0;
        let metric = encoder.encode_descriptor(
            "nodepulse_lease_renew_lag_seconds",
            "Seconds since the renewTime of the last Lease write the API server accepted; past leaseDurationSeconds the node-lifecycle controller marks the node Unknown.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(lag).encode(metric)
    }
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
    (
        method_verb(method, named, query_flag(uri, "watch")),
        resource,
    )
}

/// Whether `uri`'s query sets the boolean `key` (`key=true` or `key=1`, as the API server
/// reads one).
pub fn query_flag(uri: &http::Uri, key: &str) -> bool {
    uri.query().is_some_and(|query| {
        query.split('&').any(|pair| {
            pair.split_once('=')
                .is_some_and(|(name, value)| name == key && matches!(value, "true" | "1"))
        })
    })
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

/// The tower layer that times every request of a kube-rs client into [`API_METRICS`], and
/// into client-go's `rest_client_*` families of the kubelet's `/metrics` (by HTTP method and
/// the server's `host:port`, which the request, relative under this layer, does not carry).
#[derive(Clone, Default)]
pub struct TimingLayer {
    pub host: Arc<str>,
}

impl<S> tower::Layer<S> for TimingLayer {
    type Service = Timing<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Timing {
            inner,
            host: Arc::clone(&self.host),
        }
    }
}

#[derive(Clone)]
pub struct Timing<S> {
    inner: S,
    host: Arc<str>,
}

/// client-go's `rest_client_request_duration_seconds` and `rest_client_requests_total`.
fn observe_rest_client(host: &str, method: &str, code: Option<u16>, took: Duration) {
    let metrics = &KUBELET_METRICS;
    let seconds = took.as_secs_f64();
    metrics
        .rest_client_request_duration
        .observe(&[host, method], seconds);
    let code = code.map_or_else(|| "<error>".to_owned(), |code| code.to_string());
    metrics.rest_client_requests.inc(&[&code, host, method]);
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
        let (host, method) = (Arc::clone(&self.host), request.method().clone());
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = result
                .as_ref()
                .ok()
                .map(|response| response.status().as_u16());
            let took = started.elapsed();
            API_METRICS.observe_request(verb, &resource, code, took);
            observe_rest_client(&host, method.as_str(), code, took);
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

    fn render(metrics: &ApiMetrics, now: Option<Timestamp>) -> String {
        let mut registry = Registry::default();
        metrics.register_at(&mut registry, now);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encoded");
        out
    }

    #[test]
    fn a_histogram_counts_each_observation_in_its_bucket_and_above() {
        let metrics = ApiMetrics::default();
        metrics.observe_request("get", "nodes", Some(200), Duration::from_millis(3));
        metrics.observe_request("get", "nodes", Some(404), Duration::from_millis(300));
        let out = render(&metrics, None);
        let line = |prefix: &str| {
            out.lines()
                .find(|line| line.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {out}"))
                .rsplit(' ')
                .next()
                .expect("a value")
                .to_owned()
        };
        let bucket = "nodepulse_rest_client_request_duration_seconds_bucket{le=";
        let labels = ",verb=\"get\",resource=\"nodes\"}";
        assert_eq!(line(&format!("{bucket}\"0.005\"{labels}")), "1");
        assert_eq!(line(&format!("{bucket}\"0.25\"{labels}")), "1");
        assert_eq!(line(&format!("{bucket}\"0.5\"{labels}")), "2");
        assert_eq!(line(&format!("{bucket}\"+Inf\"{labels}")), "2");
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
        assert!(
            !render(&metrics, None).contains("nodepulse_lease_renew_lag_seconds"),
            "no lag before the first renewal"
        );
        let renewed: Timestamp = "2026-11-29T22:00:00Z".parse().expect("a time");
        metrics.lease_renewal(Some(renewed));
        metrics.lease_renewal(None);
        let out = render(
            &metrics,
            Some(renewed + jiff::SignedDuration::from_millis(2500)),
        );
        assert!(
            out.contains("nodepulse_lease_renew_lag_seconds 2.5\n"),
            "{out}"
        );
        assert!(out.contains("nodepulse_lease_renewals_total{result=\"error\"} 1\n"));
        assert!(out.contains("nodepulse_lease_renewals_total{result=\"success\"} 1\n"));
    }
}
