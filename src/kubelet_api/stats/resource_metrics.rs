//! `/metrics/resource` as the kubelet's resource metrics collector writes it, the families
//! metrics-server parses: node, container and pod CPU time (seconds) and memory working set
//! (bytes), each sample with the figure's time as an explicit millisecond timestamp; container
//! start times (unix seconds, no timestamp); `resource_scrape_error` 1 and nothing else when the
//! figures could not be read. Families are sorted by name and samples by their labels, as the
//! Prometheus Go client gathers them; `scrape_error` is hidden as 1.36 hides it.

use std::fmt::Write as _;

use http::{HeaderValue, StatusCode, header};

use super::{CpuAndMemory, NodeFigures, Sample, StatsError};
use crate::kubelet_api::reply::{self, Reply};

/// The exposition type the Prometheus Go client answers a scraper without `Accept` with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn serve(state: &crate::kubelet_api::ApiState) -> Reply {
    let figures = super::cpu_and_memory(state).await;
    if let Err(error) = &figures {
        tracing::warn!(%error, "resource metrics without figures");
    }
    let mut reply = reply::text(StatusCode::OK, render(&figures));
    reply
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    reply
}

/// Label pairs, sorted by name.
type Labels<'a> = Vec<(&'static str, &'a str)>;

struct Family<'a> {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    /// Labels, value, timestamp (milliseconds).
    samples: Vec<(Labels<'a>, f64, Option<i64>)>,
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn cpu_sample(usage: &CpuAndMemory) -> Option<(f64, Option<i64>)> {
    usage
        .cpu
        .map(|Sample { time, value }| (seconds(value), Some(time.as_millisecond())))
}

fn memory_sample(usage: &CpuAndMemory) -> Option<(f64, Option<i64>)> {
    usage
        .memory
        .map(|Sample { time, value }| (value as f64, Some(time.as_millisecond())))
}

/// The text exposition of one scrape.
pub fn render(figures: &Result<NodeFigures, StatsError>) -> String {
    let mut families = Vec::new();
    let scrape_error = match figures {
        Ok(figures) => {
            families = families_of(figures);
            0.0
        }
        Err(_) => 1.0,
    };
    families.push(Family {
        name: "resource_scrape_error",
        help: "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
        kind: "gauge",
        samples: vec![(Vec::new(), scrape_error, None)],
    });
    families.sort_by_key(|family| family.name);
    let mut text = String::new();
    for family in families.iter().filter(|family| !family.samples.is_empty()) {
        let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
        let mut samples: Vec<_> = family.samples.iter().collect();
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        for (labels, value, timestamp) in samples {
            text.push_str(family.name);
            if !labels.is_empty() {
                let pairs: Vec<String> = labels
                    .iter()
                    .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
                    .collect();
                let _ = write!(text, "{{{}}}", pairs.join(","));
            }
            let _ = write!(text, " {value}");
            if let Some(timestamp) = timestamp {
                let _ = write!(text, " {timestamp}");
            }
            text.push('\n');
        }
    }
    text
}

fn families_of(figures: &NodeFigures) -> Vec<Family<'_>> {
    let family = |name, help, kind| Family {
        name,
        help,
        kind,
        samples: Vec::new(),
    };
    let mut node_cpu = family(
        "node_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        "counter",
    );
    let mut node_memory = family(
        "node_memory_working_set_bytes",
        "[STABLE] Current working set of the node in bytes",
        "gauge",
    );
    let mut container_cpu = family(
        "container_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        "counter",
    );
    let mut container_memory = family(
        "container_memory_working_set_bytes",
        "[STABLE] Current working set of the container in bytes",
        "gauge",
    );
    let mut container_start = family(
        "container_start_time_seconds",
        "[STABLE] Start time of the container since unix epoch in seconds",
        "gauge",
    );
    let mut pod_cpu = family(
        "pod_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        "counter",
    );
    let mut pod_memory = family(
        "pod_memory_working_set_bytes",
        "[STABLE] Current working set of the pod in bytes",
        "gauge",
    );
    if let Some((value, at)) = cpu_sample(&figures.node) {
        node_cpu.samples.push((Vec::new(), value, at));
    }
    if let Some((value, at)) = memory_sample(&figures.node) {
        node_memory.samples.push((Vec::new(), value, at));
    }
    for pod in &figures.pods {
        let pod_labels = vec![
            ("namespace", pod.namespace.as_str()),
            ("pod", pod.name.as_str()),
        ];
        if let Some((value, at)) = cpu_sample(&pod.usage) {
            pod_cpu.samples.push((pod_labels.clone(), value, at));
        }
        if let Some((value, at)) = memory_sample(&pod.usage) {
            pod_memory.samples.push((pod_labels, value, at));
        }
        for container in &pod.containers {
            let labels = vec![
                ("container", container.name.as_str()),
                ("namespace", pod.namespace.as_str()),
                ("pod", pod.name.as_str()),
            ];
            if let Some(start) = container.start_time {
                let unix = start.as_nanosecond() as f64 / 1e9;
                container_start.samples.push((labels.clone(), unix, None));
            }
            if let Some((value, at)) = cpu_sample(&container.usage) {
                container_cpu.samples.push((labels.clone(), value, at));
            }
            if let Some((value, at)) = memory_sample(&container.usage) {
                container_memory.samples.push((labels, value, at));
            }
        }
    }
    vec![
        node_cpu,
        node_memory,
        container_cpu,
        container_memory,
        container_start,
        pod_cpu,
        pod_memory,
    ]
}

/// A label value as the text format escapes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_scrape_is_resource_scrape_error_alone() {
        let failed = Err(StatsError::Task("gone".into()));
        assert_eq!(
            render(&failed),
            "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n\
             # TYPE resource_scrape_error gauge\nresource_scrape_error 1\n"
        );
    }
}
