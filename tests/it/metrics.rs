//! `GET /metrics` of the daemon as a process, scraped over real HTTP while it keeps a Node on a
//! test cluster: the families docs/operating/metrics.md documents are there, with the names and labels they have
//! always had, in valid OpenMetrics text format with the naming conventions (`_total` counters,
//! `_seconds` in base units, histograms with buckets), and their values move — requests, status updates and Lease renewals count up, the
//! Lease's lag stays under its duration, and a killed actor's restart is counted.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
};

const TOKEN: &str = "metrics-test-token-8c2e51f0";

/// Every family `/metrics` serves: name (without a counter's `_total`), type, label names.
const FAMILIES: [&str; 19] = [
    "nodepulse_actor_handling_seconds counter [actor,node]",
    "nodepulse_actor_mailbox_capacity gauge [actor,node]",
    "nodepulse_actor_mailbox_depth gauge [actor,node]",
    "nodepulse_actor_mailbox_high_water gauge [actor,node]",
    "nodepulse_actor_messages_handled counter [actor,node,type]",
    "nodepulse_actor_restarts counter [actor,node]",
    "nodepulse_actor_state gauge [actor,node,state]",
    "nodepulse_api_unreachable_since_seconds gauge []",
    "nodepulse_event_write_retries counter []",
    "nodepulse_events counter [outcome]",
    "nodepulse_events_queued gauge []",
    "nodepulse_kept_pod_decodes counter []",
    "nodepulse_kept_pods_decoded gauge []",
    "nodepulse_kubelet_api_connections gauge []",
    "nodepulse_lease_renew_lag_seconds gauge []",
    "nodepulse_lease_renewals counter [result]",
    "nodepulse_node_status_update counter [result]",
    "nodepulse_rest_client_request_duration_seconds histogram [resource,verb]",
    "nodepulse_rest_client_requests counter [code,resource,verb]",
];

/// The daemon, killed when dropped so a failing test leaves nothing behind.
struct Daemon {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    _config: tempfile::NamedTempFile,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(kubeconfig: &std::path::Path, node: &str) -> Self {
        let mut config = tempfile::NamedTempFile::new().expect("temp file");
        write!(
            config,
            "runtime: simulated\nrootDir: /\nnodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\n\
             debug:\n  address: 127.0.0.1:0\n  faultInjection: {{enabled: true, token: {TOKEN}}}\n"
        )
        .expect("written");
        let mut child = Command::new(env!("CARGO_BIN_EXE_nodepulse"))
            .arg("--config")
            .arg(config.path())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--node-name", node, "--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the daemon starts");
        let stderr = child.stderr.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(line);
            }
        });
        Self {
            child,
            lines,
            _config: config,
        }
    }

    /// The debug endpoint's address, once the daemon has logged that it runs.
    async fn debug_address(&self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let found = self.lines.lock().expect("lines").iter().find_map(|line| {
                let event: serde_json::Value = serde_json::from_str(line).ok()?;
                (event["message"] == "nodepulse is running")
                    .then(|| event["debug"].as_str().map(str::to_owned))
                    .flatten()
            });
            if let Some(address) = found {
                return address;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not say it runs; stderr:\n{}",
                self.lines.lock().expect("lines").join("\n")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Scrapes until `condition` holds of a scrape, and returns that scrape.
async fn scrape_until(
    http: &reqwest::Client,
    address: &str,
    what: &str,
    condition: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let samples = scrape(http, address).await;
        if condition(&samples) {
            return samples;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting until {what}; last scrape: {samples:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One scrape: sample (name with its labels in a canonical order) → value, after checking
/// the text format.
async fn scrape(http: &reqwest::Client, address: &str) -> BTreeMap<String, f64> {
    scrape_families(http, address).await.1
}

/// One scrape's families (name → type and label names) and samples.
async fn scrape_families(
    http: &reqwest::Client,
    address: &str,
) -> (BTreeMap<String, Family>, BTreeMap<String, f64>) {
    let response = http
        .get(format!("http://{address}/metrics"))
        .send()
        .await
        .expect("/metrics answers");
    assert!(response.status().is_success());
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    parse(&response.text().await.expect("a body"))
}

/// A metric family as scraped: its type and every label name its samples carry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Family {
    kind: String,
    labels: std::collections::BTreeSet<String>,
}

/// `name{b="2",a="1"}` as `name{a="1",b="2"}`, so samples compare whatever the label order.
fn canonical(sample: &str) -> String {
    let Some((name, labels)) = sample.split_once('{') else {
        return sample.to_owned();
    };
    let mut labels: Vec<&str> = labels.trim_end_matches('}').split("\",").collect();
    labels.sort_unstable();
    let joined = labels
        .iter()
        .map(|label| label.trim_end_matches('"'))
        .collect::<Vec<_>>()
        .join("\",");
    format!("{name}{{{joined}\"}}")
}

/// Parses the OpenMetrics exposition, failing on anything malformed or against the
/// conventions: counters' samples end in `_total`, histograms are in seconds, `# EOF` last.
fn parse(body: &str) -> (BTreeMap<String, Family>, BTreeMap<String, f64>) {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    assert_eq!(
        body.lines().last(),
        Some("# EOF"),
        "the exposition ends with # EOF"
    );
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(name.starts_with("nodepulse_"), "unprefixed family {name}");
            match kind {
                "counter" => assert!(
                    !name.ends_with("_total"),
                    "counter family {name} named with its sample suffix"
                ),
                "histogram" => assert!(
                    name.ends_with("_seconds"),
                    "histogram {name} not in seconds"
                ),
                "gauge" => assert!(
                    !name.ends_with("_total"),
                    "gauge {name} named like a counter"
                ),
                other => panic!("unexpected type {other} of {name}"),
            }
            let family = Family {
                kind: kind.to_owned(),
                labels: Default::default(),
            };
            assert!(
                families.insert(name.to_owned(), family).is_none(),
                "{name} twice"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (sample, value) = line.rsplit_once(' ').expect("a sample and a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = sample.split('{').next().expect("a name");
        let family = ["_bucket", "_sum", "_count", "_total"]
            .iter()
            .find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                let kind = &families.get(base)?.kind;
                let fits = if *suffix == "_total" {
                    kind == "counter"
                } else {
                    kind == "histogram"
                };
                fits.then_some(base)
            })
            .unwrap_or(name);
        let entry = families
            .get_mut(family)
            .unwrap_or_else(|| panic!("sample {name} before its # TYPE"));
        if entry.kind == "counter" {
            assert!(
                name.ends_with("_total"),
                "counter sample {name} without _total"
            );
        }
        if let Some((_, labels)) = sample.split_once('{') {
            for label in labels.trim_end_matches('}').split("\",") {
                let key = label.split('=').next().expect("a label name");
                if key != "le" {
                    entry.labels.insert(key.to_owned());
                }
            }
        }
        samples.insert(canonical(sample), value);
    }
    (families, samples)
}

fn value(samples: &BTreeMap<String, f64>, sample: &str) -> f64 {
    samples.get(&canonical(sample)).copied().unwrap_or(0.0)
}

#[actix_rt::test]
async fn metrics_are_named_as_prometheus_and_the_kubelet_name_them_and_move() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("metrics");
    let daemon = Daemon::start(&cluster.kubeconfig, &node);
    let address = daemon.debug_address().await;
    let http = reqwest::Client::new();

    let status_patches = "nodepulse_node_status_update_total{result=\"success\"}";
    let renewals = "nodepulse_lease_renewals_total{result=\"success\"}";
    let status_latency = "nodepulse_rest_client_request_duration_seconds_count{verb=\"patch\",resource=\"nodes/status\"}";
    let lease_requests =
        "nodepulse_rest_client_requests_total{verb=\"patch\",resource=\"leases\",code=\"200\"}";
    let first = scrape_until(
        &http,
        &address,
        "the first status update and Lease renewal are counted",
        |samples| value(samples, status_patches) >= 1.0 && value(samples, lease_requests) >= 1.0,
    )
    .await;
    for family in [
        "nodepulse_rest_client_request_duration_seconds_bucket{verb=\"create\",resource=\"nodes\",le=\"+Inf\"}",
        "nodepulse_rest_client_request_duration_seconds_sum{verb=\"patch\",resource=\"nodes/status\"}",
        "nodepulse_rest_client_requests_total{verb=\"create\",resource=\"leases\",code=\"201\"}",
        "nodepulse_lease_renew_lag_seconds",
        "nodepulse_actor_restarts_total{node=\"NODE\",actor=\"lease\"}",
        "nodepulse_actor_mailbox_depth{node=\"NODE\",actor=\"node-status\"}",
    ] {
        let family = canonical(&family.replace("NODE", &node));
        assert!(first.contains_key(&family), "no {family} in {first:#?}");
    }
    // Every family, with the type and label names it had before the move to
    // prometheus-client; a new family is added here (and to docs/operating/metrics.md) on purpose.
    let (families, _) = scrape_families(&http, &address).await;
    let found: Vec<String> = families
        .iter()
        .map(|(name, family)| {
            let labels: Vec<&str> = family.labels.iter().map(String::as_str).collect();
            format!("{name} {} [{}]", family.kind, labels.join(","))
        })
        .collect();
    assert_eq!(found, FAMILIES, "the /metrics families");

    let lag = value(&first, "nodepulse_lease_renew_lag_seconds");
    assert!(
        (0.0..4.0).contains(&lag),
        "the Lease lags {lag}s behind a 4s duration"
    );

    // Values move: more renewals and status updates, and a killed actor's restart.
    let restarts = format!("nodepulse_actor_restarts_total{{node=\"{node}\",actor=\"lease\"}}");
    let killed = http
        .post(format!(
            "http://{address}/debug/actors/lease/kill?mode=stop"
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the kill route answers");
    assert_eq!(killed.status().as_u16(), 202);
    scrape_until(
        &http,
        &address,
        "renewals, status updates and the restart are counted",
        |now| {
            value(now, renewals) > value(&first, renewals) + 1.0
                && value(now, status_patches) > value(&first, status_patches)
                && value(now, status_latency) > value(&first, status_latency)
                && value(now, &restarts) >= 1.0
        },
    )
    .await;
    drop(daemon);
    cluster.delete_node(&node).await;
}
