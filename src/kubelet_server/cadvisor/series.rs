//! One cAdvisor "container" of `/metrics/cadvisor`: a cgroup with the kubelet's labels
//! (`containerPrometheusLabelsFunc`: `id` the cgroup, `name` the runtime's ID, `image`, and the
//! pod's `pod`, `namespace` and `container` names, each written even when empty, as Prometheus
//! wants every series of a family to carry the same labels) and its figures. A pod without a
//! pod cgroup is one more, its `container=""` series the sum of its sandbox's and containers'
//! figures (what its pod cgroup would hold), with no `id`, `name` or `image`.

use std::borrow::Cow;

use jiff::Timestamp;

use crate::{
    host::{
        cgroup::{CgroupFigures, CgroupMemory, DeviceIo, DeviceNames},
        network::InterfaceCounters,
    },
    kubelet_server::stats::collection::CgroupRecord,
};

/// A device's counters with its label values.
#[derive(Debug, Clone)]
pub struct NamedIo {
    pub device: String,
    pub major: String,
    pub minor: String,
    pub io: DeviceIo,
}

/// The labels and figures of one container.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    /// `container`, `id`, `image`, `name`, `namespace`, `pod`: sorted by name.
    pub labels: [(&'static str, &'a str); 6],
    pub figures: Cow<'a, CgroupFigures>,
    pub io: Vec<NamedIo>,
    pub network: &'a [InterfaceCounters],
    /// When it started (the spec's creation time); `None` for a sum.
    pub started: Option<Timestamp>,
    /// A sum of cgroups: it has no limits of its own, nor counts of limit hits or OOM kills.
    pub summed: bool,
}

pub fn labels<'a>(
    container: &'a str,
    id: &'a str,
    image: &'a str,
    name: &'a str,
    namespace: &'a str,
    pod: &'a str,
) -> [(&'static str, &'a str); 6] {
    [
        ("container", container),
        ("id", id),
        ("image", image),
        ("name", name),
        ("namespace", namespace),
        ("pod", pod),
    ]
}

/// The devices of `io`, named.
pub fn named(io: &[DeviceIo], names: &DeviceNames) -> Vec<NamedIo> {
    io.iter()
        .map(|io| NamedIo {
            device: names.name(io.major, io.minor),
            major: io.major.to_string(),
            minor: io.minor.to_string(),
            io: *io,
        })
        .collect()
}

/// The series of one read cgroup.
pub fn of_record<'a>(record: &'a CgroupRecord, names: &DeviceNames) -> Series<'a> {
    Series {
        labels: labels(
            &record.container,
            &record.cgroup,
            &record.image,
            &record.id,
            &record.namespace,
            &record.pod,
        ),
        io: named(&record.figures.io, names),
        figures: Cow::Borrowed(&record.figures),
        network: &record.network,
        started: Some(record.started),
        summed: false,
    }
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *total = Some(total.unwrap_or(0).saturating_add(value));
    }
}

/// The sum of a pod's cgroups' figures: CPU, memory and block I/O use, tasks. Limits, limit
/// hits, OOM kills and pressure are each cgroup's own and have no sum.
pub fn sum(records: &[&CgroupRecord]) -> CgroupFigures {
    let mut total = CgroupFigures::default();
    let mut memory: Option<CgroupMemory> = None;
    for figures in records.iter().map(|record| &record.figures) {
        add(&mut total.cpu_nanos, figures.cpu_nanos);
        add(&mut total.cpu.user_nanos, figures.cpu.user_nanos);
        add(&mut total.cpu.system_nanos, figures.cpu.system_nanos);
        add(&mut total.tasks.processes, figures.tasks.processes);
        add(&mut total.tasks.threads, figures.tasks.threads);
        if let Some(one) = &figures.memory {
            let sum = memory.get_or_insert_with(CgroupMemory::default);
            sum.usage_bytes = sum.usage_bytes.saturating_add(one.usage_bytes);
            sum.working_set_bytes = sum.working_set_bytes.saturating_add(one.working_set_bytes);
            for (into, from) in [
                (&mut sum.rss_bytes, one.rss_bytes),
                (&mut sum.cache_bytes, one.cache_bytes),
                (&mut sum.mapped_file_bytes, one.mapped_file_bytes),
                (&mut sum.swap_bytes, one.swap_bytes),
                (&mut sum.kernel_bytes, one.kernel_bytes),
                (&mut sum.active_file_bytes, one.active_file_bytes),
                (&mut sum.inactive_file_bytes, one.inactive_file_bytes),
                (&mut sum.page_faults, one.page_faults),
                (&mut sum.major_page_faults, one.major_page_faults),
                (&mut sum.hierarchy_page_faults, one.hierarchy_page_faults),
                (
                    &mut sum.hierarchy_major_page_faults,
                    one.hierarchy_major_page_faults,
                ),
            ] {
                add(into, from);
            }
        }
        for device in &figures.io {
            let found = (total.io.iter_mut())
                .find(|known| (known.major, known.minor) == (device.major, device.minor));
            match found {
                Some(known) => {
                    known.read_bytes = known.read_bytes.saturating_add(device.read_bytes);
                    known.write_bytes = known.write_bytes.saturating_add(device.write_bytes);
                    known.reads = known.reads.saturating_add(device.reads);
                    known.writes = known.writes.saturating_add(device.writes);
                }
                None => total.io.push(*device),
            }
        }
    }
    total.memory = memory;
    total
}
