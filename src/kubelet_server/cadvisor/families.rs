//! The container families of `/metrics/cadvisor`, with the names, help texts, extra labels and
//! units of cAdvisor's `metrics/prometheus.go` (the kubelet's metric set: CPU, memory, disk I/O,
//! network, processes, OOM and, where the kernel has PSI, pressure), each a function from one
//! container's figures to its samples. Left out, as `docs/operating/metrics.md` says: what
//! needs a walk of every process (`container_file_descriptors`, `container_sockets`,
//! `container_ulimits_soft`), the load reader's (`container_cpu_load_average_10s`,
//! `container_tasks_state`: off in the kubelet too, always 0) and per-CPU time.

use super::series::Series;

/// Where a family's samples go: the extra labels (sorted by name) and the value.
pub type Emit<'e> = dyn FnMut(&[(&'static str, &str)], f64) + 'e;

pub struct ContainerFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: &'static str,
    /// Whether its samples carry the collection's time (cAdvisor's stats timestamp), as all
    /// but the spec's figures do.
    pub timestamped: bool,
    pub values: fn(&Series, &mut Emit),
}

const NANOS: f64 = 1e9;
const MICROS: f64 = 1e6;

fn one(value: Option<u64>, emit: &mut Emit) {
    if let Some(value) = value {
        emit(&[], value as f64);
    }
}

fn memory(
    series: &Series,
    field: fn(&crate::host::cgroup::CgroupMemory) -> Option<u64>,
    emit: &mut Emit,
) {
    if let Some(memory) = &series.figures.memory {
        emit(&[], field(memory).unwrap_or(0) as f64);
    }
}

/// A figure of the CFS quota, only for a cgroup with one (cAdvisor's `Quota != 0`).
fn cfs(series: &Series, value: Option<u64>, scale: f64, emit: &mut Emit) {
    if series.figures.limits.cpu_quota.is_some()
        && let Some(value) = value
    {
        emit(&[], value as f64 / scale);
    }
}

fn devices(series: &Series, value: fn(&crate::host::cgroup::DeviceIo) -> u64, emit: &mut Emit) {
    for named in &series.io {
        emit(&[("device", &named.device)], value(&named.io) as f64);
    }
}

fn interfaces(
    series: &Series,
    value: fn(&crate::host::network::InterfaceCounters) -> u64,
    emit: &mut Emit,
) {
    for interface in series.network {
        emit(&[("interface", &interface.name)], value(interface) as f64);
    }
}

fn pressure(
    series: &Series,
    resource: fn(&crate::host::pressure::Pressures) -> Option<crate::host::pressure::Pressure>,
    full: bool,
    emit: &mut Emit,
) {
    if let Some(pressure) = resource(&series.figures.pressure) {
        let line = if full { pressure.full } else { pressure.some };
        emit(&[], line.total_micros as f64 / MICROS);
    }
}

macro_rules! family {
    ($name:literal, $help:literal, $kind:literal, $values:expr) => {
        ContainerFamily {
            name: $name,
            help: $help,
            kind: $kind,
            timestamped: true,
            values: $values,
        }
    };
}

/// The families with samples of a container's figures, in cAdvisor's order.
pub const FAMILIES: &[ContainerFamily] = &[
    family!(
        "container_cpu_user_seconds_total",
        "Cumulative user cpu time consumed in seconds.",
        "counter",
        |s, e| one(s.figures.cpu.user_nanos, &mut |l, v| e(l, v / NANOS))
    ),
    family!(
        "container_cpu_system_seconds_total",
        "Cumulative system cpu time consumed in seconds.",
        "counter",
        |s, e| one(s.figures.cpu.system_nanos, &mut |l, v| e(l, v / NANOS))
    ),
    family!(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed in seconds.",
        "counter",
        |s, e| if let Some(total) = s.figures.cpu_nanos.filter(|total| *total > 0) {
            e(&[("cpu", "total")], total as f64 / NANOS);
        }
    ),
    family!(
        "container_cpu_cfs_periods_total",
        "Number of elapsed enforcement period intervals.",
        "counter",
        |s, e| cfs(s, s.figures.cpu.periods, 1.0, e)
    ),
    family!(
        "container_cpu_cfs_throttled_periods_total",
        "Number of throttled period intervals.",
        "counter",
        |s, e| cfs(s, s.figures.cpu.throttled_periods, 1.0, e)
    ),
    family!(
        "container_cpu_cfs_throttled_seconds_total",
        "Total time duration the container has been throttled.",
        "counter",
        |s, e| cfs(s, s.figures.cpu.throttled_nanos, NANOS, e)
    ),
    family!(
        "container_memory_cache",
        "Number of bytes of page cache memory.",
        "gauge",
        |s, e| memory(s, |m| m.cache_bytes, e)
    ),
    family!(
        "container_memory_rss",
        "Size of RSS in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.rss_bytes, e)
    ),
    family!(
        "container_memory_kernel_usage",
        "Size of kernel memory allocated in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.kernel_bytes, e)
    ),
    family!(
        "container_memory_mapped_file",
        "Size of memory mapped files in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.mapped_file_bytes, e)
    ),
    family!(
        "container_memory_swap",
        "Container swap usage in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.swap_bytes, e)
    ),
    family!(
        "container_memory_failcnt",
        "Number of memory usage hits limits",
        "counter",
        |s, e| if !s.summed {
            memory(s, |m| m.failcnt, e)
        }
    ),
    family!(
        "container_memory_usage_bytes",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
        "gauge",
        |s, e| memory(s, |m| Some(m.usage_bytes), e)
    ),
    family!(
        "container_memory_max_usage_bytes",
        "Maximum memory usage recorded in bytes",
        "gauge",
        |s, e| if !s.summed {
            memory(s, |m| m.max_usage_bytes, e)
        }
    ),
    family!(
        "container_memory_working_set_bytes",
        "Current working set in bytes.",
        "gauge",
        |s, e| memory(s, |m| Some(m.working_set_bytes), e)
    ),
    family!(
        "container_memory_total_active_file_bytes",
        "Current total active file in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.active_file_bytes, e)
    ),
    family!(
        "container_memory_total_inactive_file_bytes",
        "Current total inactive file in bytes.",
        "gauge",
        |s, e| memory(s, |m| m.inactive_file_bytes, e)
    ),
    family!(
        "container_memory_failures_total",
        "Cumulative count of memory allocation failures.",
        "counter",
        |s, e| if let Some(m) = &s.figures.memory {
            for (kind, scope, value) in [
                ("pgfault", "container", m.page_faults),
                ("pgmajfault", "container", m.major_page_faults),
                ("pgfault", "hierarchy", m.hierarchy_page_faults),
                ("pgmajfault", "hierarchy", m.hierarchy_major_page_faults),
            ] {
                e(
                    &[("failure_type", kind), ("scope", scope)],
                    value.unwrap_or(0) as f64,
                );
            }
        }
    ),
    family!(
        "container_fs_reads_bytes_total",
        "Cumulative count of bytes read",
        "counter",
        |s, e| devices(s, |io| io.read_bytes, e)
    ),
    family!(
        "container_fs_reads_total",
        "Cumulative count of reads completed",
        "counter",
        |s, e| devices(s, |io| io.reads, e)
    ),
    family!(
        "container_fs_writes_bytes_total",
        "Cumulative count of bytes written",
        "counter",
        |s, e| devices(s, |io| io.write_bytes, e)
    ),
    family!(
        "container_fs_writes_total",
        "Cumulative count of writes completed",
        "counter",
        |s, e| devices(s, |io| io.writes, e)
    ),
    family!(
        "container_blkio_device_usage_total",
        "Blkio Device bytes usage",
        "counter",
        |s, e| for named in &s.io {
            for (operation, value) in [
                ("Read", named.io.read_bytes),
                ("Write", named.io.write_bytes),
            ] {
                let labels = [
                    ("device", named.device.as_str()),
                    ("major", &named.major),
                    ("minor", &named.minor),
                    ("operation", operation),
                ];
                e(&labels, value as f64);
            }
        }
    ),
    family!(
        "container_network_receive_bytes_total",
        "Cumulative count of bytes received",
        "counter",
        |s, e| interfaces(s, |i| i.rx_bytes, e)
    ),
    family!(
        "container_network_receive_packets_total",
        "Cumulative count of packets received",
        "counter",
        |s, e| interfaces(s, |i| i.rx_packets, e)
    ),
    family!(
        "container_network_receive_packets_dropped_total",
        "Cumulative count of packets dropped while receiving",
        "counter",
        |s, e| interfaces(s, |i| i.rx_dropped, e)
    ),
    family!(
        "container_network_receive_errors_total",
        "Cumulative count of errors encountered while receiving",
        "counter",
        |s, e| interfaces(s, |i| i.rx_errors, e)
    ),
    family!(
        "container_network_transmit_bytes_total",
        "Cumulative count of bytes transmitted",
        "counter",
        |s, e| interfaces(s, |i| i.tx_bytes, e)
    ),
    family!(
        "container_network_transmit_packets_total",
        "Cumulative count of packets transmitted",
        "counter",
        |s, e| interfaces(s, |i| i.tx_packets, e)
    ),
    family!(
        "container_network_transmit_packets_dropped_total",
        "Cumulative count of packets dropped while transmitting",
        "counter",
        |s, e| interfaces(s, |i| i.tx_dropped, e)
    ),
    family!(
        "container_network_transmit_errors_total",
        "Cumulative count of errors encountered while transmitting",
        "counter",
        |s, e| interfaces(s, |i| i.tx_errors, e)
    ),
    family!(
        "container_processes",
        "Number of processes running inside the container.",
        "gauge",
        |s, e| one(s.figures.tasks.processes, e)
    ),
    family!(
        "container_threads_max",
        "Maximum number of threads allowed inside the container, infinity if value is zero",
        "gauge",
        |s, e| if !s.summed && s.figures.tasks.threads.is_some() {
            e(&[], s.figures.tasks.threads_max.unwrap_or(0) as f64);
        }
    ),
    family!(
        "container_threads",
        "Number of threads running inside the container",
        "gauge",
        |s, e| one(s.figures.tasks.threads, e)
    ),
    family!(
        "container_oom_events_total",
        "Count of out of memory events observed for the container",
        "counter",
        |s, e| if !s.summed {
            memory(s, |m| m.oom_kills, e)
        }
    ),
    family!(
        "container_pressure_cpu_stalled_seconds_total",
        "Total time duration no tasks in the container could make progress due to CPU congestion.",
        "counter",
        |s, e| pressure(s, |p| p.cpu, true, e)
    ),
    family!(
        "container_pressure_cpu_waiting_seconds_total",
        "Total time duration tasks in the container have waited due to CPU congestion.",
        "counter",
        |s, e| pressure(s, |p| p.cpu, false, e)
    ),
    family!(
        "container_pressure_memory_stalled_seconds_total",
        "Total time duration no tasks in the container could make progress due to memory congestion.",
        "counter",
        |s, e| pressure(s, |p| p.memory, true, e)
    ),
    family!(
        "container_pressure_memory_waiting_seconds_total",
        "Total time duration tasks in the container have waited due to memory congestion.",
        "counter",
        |s, e| pressure(s, |p| p.memory, false, e)
    ),
    family!(
        "container_pressure_io_stalled_seconds_total",
        "Total time duration no tasks in the container could make progress due to IO congestion.",
        "counter",
        |s, e| pressure(s, |p| p.io, true, e)
    ),
    family!(
        "container_pressure_io_waiting_seconds_total",
        "Total time duration tasks in the container have waited due to IO congestion.",
        "counter",
        |s, e| pressure(s, |p| p.io, false, e)
    ),
];

macro_rules! spec {
    ($name:literal, $help:literal, $values:expr) => {
        ContainerFamily {
            name: $name,
            help: $help,
            kind: "gauge",
            timestamped: false,
            values: $values,
        }
    };
}

/// A memory limit as cAdvisor's spec writes it: 0 for none.
fn limit(value: Option<u64>) -> f64 {
    value.unwrap_or(0) as f64
}

/// The spec's families (no timestamp): start time and limits; a sum has neither.
pub const SPEC_FAMILIES: &[ContainerFamily] = &[
    spec!(
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds.",
        |s, e| if let Some(started) = s.started {
            e(&[], started.as_second() as f64)
        }
    ),
    spec!(
        "container_spec_cpu_period",
        "CPU period of the container.",
        |s, e| if !s.summed && s.figures.cpu_nanos.is_some() {
            e(&[], s.figures.limits.cpu_period.unwrap_or(0) as f64);
        }
    ),
    spec!(
        "container_spec_cpu_quota",
        "CPU quota of the container.",
        |s, e| if !s.summed {
            one(s.figures.limits.cpu_quota, e)
        }
    ),
    spec!(
        "container_spec_cpu_shares",
        "CPU share of the container.",
        |s, e| if !s.summed && s.figures.cpu_nanos.is_some() {
            e(&[], s.figures.limits.cpu_shares.unwrap_or(0) as f64);
        }
    ),
    spec!(
        "container_spec_memory_limit_bytes",
        "Memory limit for the container.",
        |s, e| if !s.summed && s.figures.memory.is_some() {
            e(&[], limit(s.figures.limits.memory_limit))
        }
    ),
    spec!(
        "container_spec_memory_reservation_limit_bytes",
        "Memory reservation limit for the container.",
        |s, e| if !s.summed && s.figures.memory.is_some() {
            e(&[], limit(s.figures.limits.memory_reservation))
        }
    ),
    spec!(
        "container_spec_memory_swap_limit_bytes",
        "Memory swap limit for the container.",
        |s, e| if !s.summed && s.figures.memory.is_some() {
            e(&[], limit(s.figures.limits.swap_limit))
        }
    ),
];
