//! `/metrics/cadvisor` (subresource `metrics`), what the kubelet's embedded cAdvisor serves
//! Prometheus: the machine's families (`machine`), then for the node's root cgroup (`id="/"`),
//! each pod's own cgroup (or, without one, the sum of its cgroups), each sandbox and each
//! running container the container families (`families`) with the kubelet's labels (`series`),
//! from the shared collection of `stats::collection` — no file is read for a scrape that
//! finds a collection younger than `housekeepingInterval`. `container_scrape_error` and
//! `machine_scrape_error` say whether the figures could be read, as cAdvisor's do.

mod families;
mod machine;
mod series;

use std::{borrow::Cow, collections::BTreeMap, sync::OnceLock};

pub use machine::Machine;

use super::{
    ApiState, exposition,
    reply::Reply,
    stats::collection::{CgroupRecord, Collection, Kind},
};
use crate::host::cgroup::DeviceNames;
use series::Series;

/// The machine's families, read on the first scrape.
pub type MachineCache = OnceLock<Machine>;

pub async fn serve(state: &ApiState) -> Reply {
    let snapshot = state.pods.snapshot();
    let collection = state
        .containers
        .collect(state.runtime.as_ref(), &snapshot)
        .await;
    if let Err(error) = &collection {
        tracing::warn!(%error, "cAdvisor metrics without container figures");
    }
    let machine = match state.machine.get() {
        Some(machine) => Some(machine.clone()),
        None => {
            let root = state.host.root().to_owned();
            let read = tokio::task::spawn_blocking(move || Machine::read(&root)).await;
            read.ok()
                .map(|machine| state.machine.get_or_init(|| machine).clone())
        }
    };
    let collection = collection.ok();
    let text = render(
        collection.as_deref(),
        machine.as_ref(),
        &state.containers.devices,
        jiff::Timestamp::now(),
    );
    exposition::reply(text)
}

/// The series of a collection: the root, then per pod its own (or summed) cgroup, its sandbox
/// and its containers. A sum's `id` is `pod<uid>`: no cgroup has it (the kubelet's pod cgroup
/// would be `/kubepods/<qos>/pod<uid>`), but two pods of one name (one going, its successor
/// coming) must not make one series.
fn all_series<'a>(collection: &'a Collection, names: &DeviceNames) -> Vec<Series<'a>> {
    let mut all = Vec::new();
    if let Some(root) = &collection.root {
        all.push(Series {
            labels: series::labels("", "/", "", "", "", ""),
            io: series::named(&root.io, names),
            figures: Cow::Borrowed(root),
            network: &collection.node_network,
            started: None,
            summed: false,
        });
    }
    let mut pods: BTreeMap<&str, Vec<&CgroupRecord>> = BTreeMap::new();
    for record in &collection.records {
        pods.entry(record.pod_uid.as_str())
            .or_default()
            .push(record);
    }
    for records in pods.values() {
        if !records.iter().any(|record| record.kind == Kind::Pod) {
            let first = records[0];
            let figures = series::sum(records);
            all.push(Series {
                labels: series::labels("", &first.pod_id, "", "", &first.namespace, &first.pod),
                io: series::named(&figures.io, names),
                figures: Cow::Owned(figures),
                network: &[],
                started: None,
                summed: true,
            });
        }
        all.extend(
            records
                .iter()
                .map(|record| series::of_record(record, names)),
        );
    }
    all
}

/// The text of one scrape; `collection` is `None` when the figures could not be read.
pub fn render(
    collection: Option<&Collection>,
    machine: Option<&Machine>,
    names: &DeviceNames,
    now: jiff::Timestamp,
) -> String {
    let mut families: Vec<(&'static str, String)> = Vec::new();
    let scrape_error = |name, help, failed: bool| {
        let mut samples = String::new();
        exposition::sample(&mut samples, name, &[], f64::from(u8::from(failed)), None);
        let mut text = String::new();
        exposition::family(&mut text, name, help, "gauge", &samples);
        (name, text)
    };
    families.push(scrape_error(
        "container_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        collection.is_none(),
    ));
    families.push(scrape_error(
        "machine_scrape_error",
        "1 if there was an error while getting machine metrics, 0 otherwise.",
        machine.is_none(),
    ));
    families.extend(machine.map(Machine::families).unwrap_or_default());
    if let Some(collection) = collection {
        let all = all_series(collection, names);
        let taken = Some(collection.taken.as_millisecond());
        let mut last_seen = String::new();
        for series in &all {
            let seconds = now.as_second() as f64;
            exposition::sample(
                &mut last_seen,
                "container_last_seen",
                &series.labels,
                seconds,
                Some(now.as_millisecond()),
            );
        }
        let mut text = String::new();
        exposition::family(
            &mut text,
            "container_last_seen",
            "Last time a container was seen by the exporter",
            "gauge",
            &last_seen,
        );
        families.push(("container_last_seen", text));
        for family in families::FAMILIES.iter().chain(families::SPEC_FAMILIES) {
            let timestamp = if family.timestamped { taken } else { None };
            let mut samples = String::new();
            for series in &all {
                let mut emit = |extra: &[(&'static str, &str)], value: f64| {
                    let mut labels: Vec<(&str, &str)> = series.labels.to_vec();
                    labels.extend_from_slice(extra);
                    labels.sort_by_key(|(name, _)| *name);
                    exposition::sample(&mut samples, family.name, &labels, value, timestamp);
                };
                (family.values)(series, &mut emit);
            }
            let mut text = String::new();
            exposition::family(&mut text, family.name, family.help, family.kind, &samples);
            families.push((family.name, text));
        }
    }
    families.sort_by_key(|(name, _)| *name);
    families.into_iter().map(|(_, text)| text).collect()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
