//! `/metrics/resource` as the kubelet's resource metrics collector writes it, the families
//! metrics-server parses: node, container and pod CPU time (seconds) and memory working set
//! (bytes), each sample with the figure's time as an explicit millisecond timestamp; container
//! start times (unix seconds, no timestamp); `resource_scrape_error` 1 and nothing else when the
//! figures could not be read. Families are sorted by name and samples by their labels, as the
//! Prometheus Go client gathers them; `scrape_error` is hidden as 1.36 hides it.

use jiff::Timestamp;

use super::{
    Scope, StatsError,
    summary::{CpuStats, MemoryStats, Summary},
};
use crate::kubelet_server::{
    exposition::{self, Family},
    reply::Reply,
};

pub async fn serve(state: &crate::kubelet_server::ApiState) -> Reply {
    let figures = super::collect(state, Scope::CpuAndMemory).await;
    if let Err(error) = &figures {
        tracing::warn!(%error, "resource metrics without figures");
    }
    exposition::reply(render(&figures))
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn at(time: Timestamp) -> Option<i64> {
    Some(time.as_millisecond())
}

fn cpu_sample(cpu: Option<&CpuStats>) -> Option<(f64, Option<i64>)> {
    let cpu = cpu?;
    Some((seconds(cpu.usage_core_nano_seconds?), at(cpu.time)))
}

fn memory_sample(memory: Option<&MemoryStats>) -> Option<(f64, Option<i64>)> {
    let memory = memory?;
    Some((memory.working_set_bytes? as f64, at(memory.time)))
}

/// The text exposition of one scrape.
pub fn render(figures: &Result<Summary, StatsError>) -> String {
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
    exposition::write(&mut families)
}

fn families_of(figures: &Summary) -> Vec<Family<'_>> {
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
    let node = &figures.node;
    if let Some((value, at)) = cpu_sample(node.cpu.as_ref()) {
        node_cpu.samples.push((Vec::new(), value, at));
    }
    if let Some((value, at)) = memory_sample(node.memory.as_ref()) {
        node_memory.samples.push((Vec::new(), value, at));
    }
    for pod in &figures.pods {
        let reference = &pod.pod_ref;
        let pod_labels = vec![
            ("namespace", reference.namespace.as_str()),
            ("pod", reference.name.as_str()),
        ];
        if let Some((value, at)) = cpu_sample(pod.cpu.as_ref()) {
            pod_cpu.samples.push((pod_labels.clone(), value, at));
        }
        if let Some((value, at)) = memory_sample(pod.memory.as_ref()) {
            pod_memory.samples.push((pod_labels, value, at));
        }
        for container in &pod.containers {
            let labels = vec![
                ("container", container.name.as_str()),
                ("namespace", reference.namespace.as_str()),
                ("pod", reference.name.as_str()),
            ];
            let unix = container.start_time.as_nanosecond() as f64 / 1e9;
            container_start.samples.push((labels.clone(), unix, None));
            if let Some((value, at)) = cpu_sample(container.cpu.as_ref()) {
                container_cpu.samples.push((labels.clone(), value, at));
            }
            if let Some((value, at)) = memory_sample(container.memory.as_ref()) {
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
