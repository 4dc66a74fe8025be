//! A real Prometheus (Debian's `prometheus`, on loopback) scrapes a node running real pods,
//! one mounting a claim, with kube-prometheus's kubelet endpoints (`/metrics`,
//! `/metrics/cadvisor`, `/metrics/probes` over HTTPS, `honor_labels`, a client certificate the
//! kubelet API trusts, the serving certificate unverified as kube-prometheus's
//! `insecureSkipVerify`): every target is up with no scrape error, samples are stored,
//! Prometheus counts no duplicate, out-of-order or out-of-bounds sample, and no endpoint writes
//! a series twice.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
};

use serde_json::Value;

use super::{
    cri_pods::NAMESPACE,
    kubelet_api_logs::serve_with,
    kubelet_api_volume_stats::{ClaimNode, PERIOD},
};
use nodepulse_testkit::{eventually_async, pods::wait_running, prometheus_text::written_twice};

/// kube-prometheus's kubelet endpoints (its ServiceMonitor's), by job.
const JOBS: [(&str, &str); 3] = [
    ("kubelet", "/metrics"),
    ("kubelet-cadvisor", "/metrics/cadvisor"),
    ("kubelet-probes", "/metrics/probes"),
];

/// Prometheus' own counters of samples it refused from a scrape.
const REFUSED: [&str; 3] = [
    "prometheus_target_scrapes_sample_duplicate_timestamp_total",
    "prometheus_target_scrapes_sample_out_of_order_total",
    "prometheus_target_scrapes_sample_out_of_bounds_total",
];

/// A Prometheus process, stopped when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether Debian's `prometheus` is installed; skips the test (outside CI) when not.
fn required(test: &str) -> bool {
    let present = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !present {
        nodepulse_testkit::skip::missing(
            test,
            "prometheus (scripts/ci-setup-prometheus.sh installs it)",
        );
    }
    present
}

/// Starts Prometheus scraping the kubelet API at `port` every second with `client` (a
/// certificate and its key, PEM).
fn start_prometheus(port: u16, client: &(String, String)) -> Prometheus {
    let dir = tempfile::tempdir().expect("a directory");
    let (cert, key) = (dir.path().join("client.crt"), dir.path().join("client.key"));
    std::fs::write(&cert, &client.0).expect("write the certificate");
    std::fs::write(&key, &client.1).expect("write the key");
    let mut config =
        String::from("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n");
    for (job, path) in JOBS {
        config += &format!(
            "- job_name: {job}\n  scheme: https\n  metrics_path: {path}\n  honor_labels: true\n  \
             tls_config: {{cert_file: {}, key_file: {}, insecure_skip_verify: true}}\n  \
             static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n",
            cert.display(),
            key.display()
        );
    }
    let file = dir.path().join("prometheus.yml");
    std::fs::write(&file, config).expect("write the configuration");
    // A port the kernel picks, given back for Prometheus to take.
    let listen = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = listen.local_addr().expect("its address");
    drop(listen);
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    Prometheus {
        child,
        url: format!("http://{address}"),
        _dir: dir,
    }
}

async fn get(url: &str, query: &[(&str, &str)]) -> Option<String> {
    let response = reqwest::Client::new()
        .get(url)
        .query(query)
        .send()
        .await
        .ok()?;
    response.status().is_success().then_some(())?;
    response.text().await.ok()
}

/// The active targets: job, health and last error.
async fn targets(prometheus: &Prometheus) -> Vec<(String, String, String)> {
    let Some(body) = get(&format!("{}/api/v1/targets", prometheus.url), &[]).await else {
        return Vec::new();
    };
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    let text = |target: &Value, key: &str| target[key].as_str().unwrap_or_default().to_owned();
    (answer["data"]["activeTargets"]
        .as_array()
        .into_iter()
        .flatten())
    .map(|target| {
        let job = target["labels"]["job"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (job, text(target, "health"), text(target, "lastError"))
    })
    .collect()
}

/// The value of instant query `query`'s one result.
async fn query(prometheus: &Prometheus, query: &str) -> Option<f64> {
    let url = format!("{}/api/v1/query", prometheus.url);
    let answer: Value = serde_json::from_str(&get(&url, &[("query", query)]).await?).ok()?;
    let value = answer["data"]["result"].get(0)?["value"][1].as_str()?;
    value.parse().ok()
}

#[actix_rt::test]
async fn a_real_prometheus_scrapes_the_kubelet_endpoints_with_no_error_or_duplicate() {
    let test = "a_real_prometheus_scrapes_the_kubelet_endpoints_with_no_error_or_duplicate";
    if !required(test) {
        return;
    }
    let Some(scene) = ClaimNode::start(test, "promscrape").await else {
        return;
    };
    let node = &scene.node;
    let api = serve_with(node, &scene.cluster.kubeconfig, PERIOD).await;
    node.guard(async {
        wait_running(&scene.cluster.client, NAMESPACE, &scene.pod).await;
        let client = api.ca.client_pem("prometheus", "system:monitoring");
        let prometheus = start_prometheus(api.served.address.port(), &client);
        eventually_async("every kubelet target is scraped and up", || async {
            let targets = targets(&prometheus).await;
            let up = |job: &str| {
                targets
                    .iter()
                    .any(|(j, health, _)| j == job && health == "up")
            };
            JOBS.iter().all(|(job, _)| up(job))
        })
        .await;
        // A few scrapes more, so a series written twice or going back in time would be seen.
        let scrapes = "count_over_time(up{job=\"kubelet-cadvisor\"}[1m])";
        eventually_async("three scrapes of each target are stored", || async {
            query(&prometheus, scrapes)
                .await
                .is_some_and(|count| count >= 3.0)
        })
        .await;
        for (job, health, error) in targets(&prometheus).await {
            assert_eq!((health.as_str(), error.as_str()), ("up", ""), "{job}");
        }
        // The pods have no probes: /metrics/probes answers, empty.
        for (job, _) in &JOBS[..2] {
            let samples = format!("scrape_samples_scraped{{job=\"{job}\"}}");
            let scraped = query(&prometheus, &samples).await;
            assert!(scraped > Some(0.0), "{job}: {scraped:?}");
        }
        let claim = format!(
            "kubelet_volume_stats_capacity_bytes{{persistentvolumeclaim=\"{}\"}}",
            scene.claim
        );
        assert!(
            query(&prometheus, &claim).await > Some(0.0),
            "the claim is stored"
        );
        // Prometheus 2.42 takes a series written twice in one scrape without a word (tried):
        // each endpoint's text is checked for one.
        for (_, path) in JOBS {
            let answer = api.client.get(path).await;
            assert_eq!(written_twice(&answer.body), Vec::<String>::new(), "{path}");
        }
        let own = get(&format!("{}/metrics", prometheus.url), &[]).await;
        let own = own.expect("Prometheus' own metrics");
        for counter in REFUSED {
            assert!(own.contains(counter), "Prometheus counts {counter}");
            let samples = own.lines().filter(|line| line.starts_with(counter));
            let values = samples.map(|line| line.rsplit_once(' ').expect("a value").1);
            let refused: f64 = values
                .map(|value| value.parse::<f64>().expect("a number"))
                .sum();
            assert_eq!(refused, 0.0, "{counter}");
        }
    })
    .await;
    api.served.stop();
}
