//! `/metrics` (subresource `metrics`) as the kubelet's legacy registry serves it: the families
//! recorded as the work happens (`nodepulse_actors::kubelet_metrics`: PLEG, pod workers, pod
//! starts, runtime operations, evictions, volume operations, API requests, certificate
//! renewals), those read from state at each scrape (the node's name, running pods and
//! containers from the pods view, the volume manager's volumes, the certificates' TTLs, the
//! process's CPU and memory) and the mounted claims' `kubelet_volume_stats_*`. Families sorted
//! by name, as the Go registry gathers them.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use nodepulse_actors::{
    kubelet_metrics::{Certificate, Histograms, KUBELET_METRICS, Values},
    pods::PodsSnapshot,
    ports::ContainerState,
};

use super::{ApiState, exposition, reply::Reply, stats::volume_stats::ClaimStats};

/// What a scrape reads besides the recorded families.
pub struct Scraped<'a> {
    pub node_name: &'a str,
    pub pods: &'a PodsSnapshot,
    /// `volume_manager_total_volumes`: by (state, plugin).
    pub total_volumes: BTreeMap<(&'static str, String), u64>,
    /// The mounted claims' figures, as last measured.
    pub claims: &'a [ClaimStats],
    pub now: SystemTime,
}

pub async fn serve(state: &ApiState) -> Reply {
    let pods = state.pods.snapshot();
    let claims = state.volume_stats.claims(state.volumes.as_ref()).await;
    let scraped = Scraped {
        claims: &claims,
        node_name: &state.node_name,
        pods: &pods,
        total_volumes: (state.volumes.as_ref())
            .map(|view| view.total_volumes())
            .unwrap_or_default(),
        now: SystemTime::now(),
    };
    exposition::reply(render(&scraped))
}

/// The families' text blocks by name; a family without samples is left out.
#[derive(Default)]
struct Text(BTreeMap<&'static str, String>);

impl Text {
    fn family(&mut self, name: &'static str, help: &str, kind: &str, samples: &str) {
        let mut block = String::new();
        exposition::family(&mut block, name, help, kind, samples);
        if !block.is_empty() {
            self.0.insert(name, block);
        }
    }

    fn finish(self) -> String {
        self.0.into_values().collect()
    }
}

/// Label pairs of `names` and `values`, sorted by name as the Go client writes them.
fn labels<'a>(names: &[&'a str], values: &'a [String]) -> Vec<(&'a str, &'a str)> {
    let mut pairs: Vec<(&str, &str)> = names
        .iter()
        .copied()
        .zip(values.iter().map(String::as_str))
        .collect();
    pairs.sort_unstable();
    pairs
}

fn values(text: &mut Text, family: &Values) {
    let desc = family.desc;
    let mut samples = String::new();
    for (values, value) in family.snapshot() {
        let labels = labels(desc.labels, &values);
        exposition::sample(&mut samples, desc.name, &labels, value, None);
    }
    text.family(desc.name, desc.help, desc.kind, &samples);
}

fn histograms(text: &mut Text, family: &Histograms) {
    let desc = family.desc;
    let (bucket, sum, count) = (
        format!("{}_bucket", desc.name),
        format!("{}_sum", desc.name),
        format!("{}_count", desc.name),
    );
    let mut samples = String::new();
    for (values, observed) in family.snapshot() {
        let labels = labels(desc.labels, &values);
        let cumulative = observed.cumulative();
        let bounds = family.bounds.iter().zip(&cumulative);
        #[allow(clippy::cast_precision_loss)] // counts far below 2^53
        for (bound, total) in bounds {
            let mut le = String::new();
            exposition::float(&mut le, *bound);
            let with_le = [labels.as_slice(), &[("le", le.as_str())]].concat();
            exposition::sample(&mut samples, &bucket, &with_le, *total as f64, None);
        }
        let with_inf = [labels.as_slice(), &[("le", "+Inf")]].concat();
        #[allow(clippy::cast_precision_loss)]
        let total = observed.count as f64;
        exposition::sample(&mut samples, &bucket, &with_inf, total, None);
        exposition::sample(&mut samples, &sum, &labels, observed.sum, None);
        exposition::sample(&mut samples, &count, &labels, total, None);
    }
    text.family(desc.name, desc.help, desc.kind, &samples);
}

/// The kubelet's `container_state` label of a runtime state.
fn state_label(state: ContainerState) -> &'static str {
    match state {
        ContainerState::Created => "created",
        ContainerState::Running => "running",
        ContainerState::Exited => "exited",
        ContainerState::Unknown => "unknown",
    }
}

/// `kubelet_running_pods` (pods with a ready sandbox) and `kubelet_running_containers` (every
/// container instance the runtime holds, by state), as the PLEG counts them at each relist.
fn running(text: &mut Text, pods: &PodsSnapshot) {
    let mut by_state: BTreeMap<&str, u64> = ["created", "exited", "running", "unknown"]
        .into_iter()
        .map(|state| (state, 0))
        .collect();
    let mut running_pods = 0_u64;
    for pod in pods.pods() {
        running_pods += u64::from(pod.sandboxes.iter().any(|sandbox| sandbox.ready));
        for container in &pod.containers {
            *by_state.entry(state_label(container.state)).or_default() += 1;
        }
    }
    let mut samples = String::new();
    #[allow(clippy::cast_precision_loss)]
    exposition::sample(
        &mut samples,
        "kubelet_running_pods",
        &[],
        running_pods as f64,
        None,
    );
    text.family(
        "kubelet_running_pods",
        "[ALPHA] Number of pods that have a running pod sandbox",
        "gauge",
        &samples,
    );
    let mut samples = String::new();
    for (state, count) in by_state {
        let labels = [("container_state", state)];
        #[allow(clippy::cast_precision_loss)]
        let count = count as f64;
        exposition::sample(
            &mut samples,
            "kubelet_running_containers",
            &labels,
            count,
            None,
        );
    }
    text.family(
        "kubelet_running_containers",
        "[ALPHA] Number of containers currently running",
        "gauge",
        &samples,
    );
}

/// The certificates' TTL gauges, for each certificate rotation keeps: whole seconds until it
/// expires (negative once it has), `+Inf` while none is held.
fn certificate_ttls(text: &mut Text, now: SystemTime) {
    for (certificate, name, help) in [
        (
            Certificate::Client,
            "kubelet_certificate_manager_client_ttl_seconds",
            "[ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
        ),
        (
            Certificate::Serving,
            "kubelet_certificate_manager_server_ttl_seconds",
            "[ALPHA] Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
        ),
    ] {
        let Some(expiry) = KUBELET_METRICS.expiry(certificate) else {
            continue;
        };
        let ttl = expiry.map_or(f64::INFINITY, |expiry| ttl_seconds(expiry, now));
        let mut samples = String::new();
        exposition::sample(&mut samples, name, &[], ttl, None);
        text.family(name, help, "gauge", &samples);
    }
}

/// Whole seconds from `now` to `expiry`, negative past it.
fn ttl_seconds(expiry: SystemTime, now: SystemTime) -> f64 {
    let seconds = |duration: Duration| duration.as_secs_f64().trunc();
    match expiry.duration_since(now) {
        Ok(left) => seconds(left),
        Err(past) => -seconds(past.duration()),
    }
}

/// `kubelet_volume_stats_*`: each mounted claim's filesystem figures.
fn volume_stats(text: &mut Text, claims: &[ClaimStats]) {
    type Figure = fn(&ClaimStats) -> Option<u64>;
    let families: [(&'static str, &str, Figure); 6] = [
        (
            "kubelet_volume_stats_capacity_bytes",
            "Capacity in bytes of the volume",
            |c| c.fs.capacity_bytes,
        ),
        (
            "kubelet_volume_stats_available_bytes",
            "Number of available bytes in the volume",
            |c| c.fs.available_bytes,
        ),
        (
            "kubelet_volume_stats_used_bytes",
            "Number of used bytes in the volume",
            |c| c.fs.used_bytes,
        ),
        (
            "kubelet_volume_stats_inodes",
            "Maximum number of inodes in the volume",
            |c| c.fs.inodes,
        ),
        (
            "kubelet_volume_stats_inodes_free",
            "Number of free inodes in the volume",
            |c| c.fs.inodes_free,
        ),
        (
            "kubelet_volume_stats_inodes_used",
            "Number of used inodes in the volume",
            |c| c.fs.inodes_used,
        ),
    ];
    for (name, help, figure) in families {
        let mut samples = String::new();
        for claim in claims {
            let Some(value) = figure(claim) else { continue };
            let labels = [
                ("namespace", claim.claim.namespace.as_str()),
                ("persistentvolumeclaim", claim.claim.name.as_str()),
            ];
            #[allow(clippy::cast_precision_loss)]
            let value = value as f64;
            exposition::sample(&mut samples, name, &labels, value, None);
        }
        text.family(name, &format!("[ALPHA] {help}"), "gauge", &samples);
    }
}

/// The Go process collector's two figures monitoring reads.
fn process(text: &mut Text) {
    if let Some(cpu) = crate::proc_stats::cpu_seconds() {
        let mut samples = String::new();
        exposition::sample(&mut samples, "process_cpu_seconds_total", &[], cpu, None);
        text.family(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            "counter",
            &samples,
        );
    }
    if let Some(resident) = crate::proc_stats::resident_bytes() {
        let mut samples = String::new();
        #[allow(clippy::cast_precision_loss)]
        let resident = resident as f64;
        exposition::sample(
            &mut samples,
            "process_resident_memory_bytes",
            &[],
            resident,
            None,
        );
        text.family(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            "gauge",
            &samples,
        );
    }
}

/// The whole exposition.
pub fn render(scraped: &Scraped<'_>) -> String {
    let mut text = Text::default();
    let metrics = &KUBELET_METRICS;
    for family in metrics.values() {
        values(&mut text, family);
    }
    for family in metrics.histograms() {
        histograms(&mut text, family);
    }
    let mut samples = String::new();
    let node = [("node", scraped.node_name)];
    exposition::sample(&mut samples, "kubelet_node_name", &node, 1.0, None);
    text.family(
        "kubelet_node_name",
        "[ALPHA] The node's name. The count is always 1.",
        "gauge",
        &samples,
    );
    running(&mut text, scraped.pods);
    certificate_ttls(&mut text, scraped.now);
    let mut samples = String::new();
    for ((state, plugin), count) in &scraped.total_volumes {
        let labels = [("plugin_name", plugin.as_str()), ("state", state)];
        #[allow(clippy::cast_precision_loss)]
        let count = *count as f64;
        exposition::sample(
            &mut samples,
            "volume_manager_total_volumes",
            &labels,
            count,
            None,
        );
    }
    text.family(
        "volume_manager_total_volumes",
        "[ALPHA] Number of volumes in Volume Manager",
        "gauge",
        &samples,
    );
    volume_stats(&mut text, scraped.claims);
    process(&mut text);
    text.finish()
}

#[cfg(test)]
#[path = "kubelet_metrics_tests.rs"]
mod tests;
