//! `GET /metrics` of the daemon as a process, scraped over real HTTP while it keeps a Node on a
//! test cluster: the families README documents are there, in valid Prometheus text format with
//! the naming conventions (`_total` counters, `_seconds` in base units, histograms with
//! buckets), and their values move — requests, status updates and Lease renewals count up, the
//! Lease's lag stays under its duration, and a killed actor's restart is counted.

mod common;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
};

const TOKEN: &str = "metrics-test-token-8c2e51f0";

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

/// One scrape: sample (name with labels) → value, after checking the text format.
async fn scrape(http: &reqwest::Client, address: &str) -> BTreeMap<String, f64> {
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
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    parse(&response.text().await.expect("a body"))
}

/// Parses the exposition text, failing on anything malformed or against the conventions.
fn parse(body: &str) -> BTreeMap<String, f64> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(name.starts_with("nodepulse_"), "unprefixed family {name}");
            match kind {
                "counter" => assert!(name.ends_with("_total"), "counter {name} without _total"),
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
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "{name} twice"
            );
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (sample, value) = line.rsplit_once(' ').expect("a sample and a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = sample.split('{').next().expect("a name");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| types.get(*base).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "sample {name} before its # TYPE"
        );
        samples.insert(sample.to_owned(), value);
    }
    samples
}

fn value(samples: &BTreeMap<String, f64>, sample: &str) -> f64 {
    samples.get(sample).copied().unwrap_or(0.0)
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
        let family = family.replace("NODE", &node);
        assert!(first.contains_key(&family), "no {family} in {first:#?}");
    }
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
