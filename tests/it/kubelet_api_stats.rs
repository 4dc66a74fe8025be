//! `/metrics/resource` on a real container (containerd), parsed with a Prometheus text parser
//! and checked as metrics-server reads it: the families and their types, the labels of each
//! sample, CPU in seconds and memory in bytes, and the explicit millisecond timestamps
//! (increasing from one scrape to the next) on every sample but the start times.

use std::collections::BTreeMap;

use super::{
    cri_pods::{NAMESPACE, Setup, create_pod, shell, spec},
    kubelet_api_logs::serve,
};
use nodepulse_testkit::{
    eventually_async,
    pods::wait_running,
    prometheus_text::{Sample, labels, parse, sample},
};

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A timestamp metrics-server accepts: present, and of this scrape (within a minute).
fn recent(sample: &Sample) -> i64 {
    let at = sample.timestamp.expect("an explicit timestamp");
    assert!((now_ms() - at).abs() < 60_000, "{at} is not now");
    at
}

#[actix_rt::test]
async fn resource_metrics_are_served_as_metrics_server_parses_them() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "resource_metrics_are_served_as_metrics_server_parses_them",
        "resmetrics",
    )
    .await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-busy", node.name);
        // Some CPU time first, so the container's figure is above zero as metrics-server wants.
        let script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let container = labels(&[("container", "app"), ("namespace", NAMESPACE), ("pod", &name)]);
        let pod = labels(&[("namespace", NAMESPACE), ("pod", &name)]);
        let scrape = || async {
            let answer = api.client.get("/metrics/resource").await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            let kind = answer.headers.get("content-type").expect("a content type");
            assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
            parse(&answer.body)
        };
        eventually_async("the container's CPU time is served above zero", || async {
            sample(&scrape().await, "container_cpu_usage_seconds_total", &container)
                .is_some_and(|sample| sample.value > 0.0)
        })
        .await;
        let first = scrape().await;
        for (family, kind) in [
            ("node_cpu_usage_seconds_total", "counter"),
            ("node_memory_working_set_bytes", "gauge"),
            ("container_cpu_usage_seconds_total", "counter"),
            ("container_memory_working_set_bytes", "gauge"),
            ("container_start_time_seconds", "gauge"),
            ("pod_cpu_usage_seconds_total", "counter"),
            ("pod_memory_working_set_bytes", "gauge"),
            ("resource_scrape_error", "gauge"),
        ] {
            let served = first.get(family).unwrap_or_else(|| panic!("no {family}"));
            assert_eq!(served.kind.as_deref(), Some(kind), "{family}");
            assert!(
                served.help.as_deref().is_some_and(|help| help.starts_with("[STABLE] ")),
                "{family}: {:?}",
                served.help
            );
        }
        assert!(!first.contains_key("scrape_error"), "hidden in 1.36");
        let error = sample(&first, "resource_scrape_error", &labels(&[])).expect("one sample");
        assert_eq!((error.value, error.timestamp), (0.0, None));

        let node_cpu = sample(&first, "node_cpu_usage_seconds_total", &labels(&[])).expect("node");
        let node_memory =
            sample(&first, "node_memory_working_set_bytes", &labels(&[])).expect("node");
        assert!(node_cpu.value > 0.0 && node_memory.value > 0.0);
        // Seconds, not nanoseconds: a node's CPU time is far below a century of cores.
        assert!(node_cpu.value < 3.2e9 * 1024.0, "{}", node_cpu.value);
        let node_at = recent(node_cpu);
        recent(node_memory);

        let cpu = sample(&first, "container_cpu_usage_seconds_total", &container).expect("cpu");
        let memory =
            sample(&first, "container_memory_working_set_bytes", &container).expect("memory");
        // A busybox shell: some CPU, well under an hour of it; bytes, between 4 KiB and 1 GiB.
        assert!(cpu.value > 0.0 && cpu.value < 3600.0, "{}", cpu.value);
        assert!(
            memory.value >= 4096.0 && memory.value < 1024.0 * 1024.0 * 1024.0,
            "{}",
            memory.value
        );
        recent(cpu);
        recent(memory);
        let start = sample(&first, "container_start_time_seconds", &container).expect("start");
        assert_eq!(start.timestamp, None, "start times carry no timestamp");
        let now = now_ms() as f64 / 1e3;
        assert!(start.value <= now && now - start.value < 600.0, "{}", start.value);

        let pod_cpu = sample(&first, "pod_cpu_usage_seconds_total", &pod).expect("pod cpu");
        let pod_memory = sample(&first, "pod_memory_working_set_bytes", &pod).expect("pod mem");
        assert!(pod_cpu.value >= cpu.value && pod_memory.value >= memory.value);
        recent(pod_cpu);
        recent(pod_memory);

        // metrics-server rates two scrapes: their timestamps must grow.
        let container_at = cpu.timestamp;
        eventually_async("a later scrape has later timestamps", || async {
            let next = scrape().await;
            let later = |family: &str, wanted: &BTreeMap<String, String>, than: Option<i64>| {
                sample(&next, family, wanted).and_then(|sample| sample.timestamp) > than
            };
            later("node_cpu_usage_seconds_total", &labels(&[]), Some(node_at))
                && later("container_cpu_usage_seconds_total", &container, container_at)
        })
        .await;
    })
    .await;
    api.served.stop();
}
