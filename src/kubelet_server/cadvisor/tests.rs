//! `/metrics/cadvisor`'s text for a collection built in the test: the kubelet's labels on
//! every series, a pod's summed series beside its sandbox's and containers', the CFS figures
//! only under a quota, pressure only where the cgroup has it, and no series twice.

use std::collections::BTreeSet;

use jiff::Timestamp;

use super::*;
use crate::host::{
    cgroup::{CgroupFigures, CgroupMemory, CpuDetail, DeviceIo, Limits, Tasks},
    network::InterfaceCounters,
    pressure::{Pressure, PressureLine, Pressures},
};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("time")
}

fn figures(cpu: u64, memory: u64) -> CgroupFigures {
    CgroupFigures {
        cpu_nanos: Some(cpu),
        cpu: CpuDetail {
            user_nanos: Some(cpu / 2),
            system_nanos: Some(cpu / 2),
            periods: Some(10),
            throttled_periods: Some(1),
            throttled_nanos: Some(5),
        },
        memory: Some(CgroupMemory {
            usage_bytes: memory,
            working_set_bytes: memory / 2,
            rss_bytes: Some(memory / 4),
            cache_bytes: Some(memory / 4),
            swap_bytes: Some(0),
            ..CgroupMemory::default()
        }),
        io: vec![DeviceIo {
            major: 254,
            minor: 0,
            read_bytes: 4096,
            write_bytes: 8192,
            reads: 1,
            writes: 2,
        }],
        tasks: Tasks {
            processes: Some(1),
            threads: Some(2),
            threads_max: None,
        },
        limits: Limits {
            cpu_shares: Some(2),
            cpu_period: Some(100_000),
            ..Limits::default()
        },
        ..CgroupFigures::default()
    }
}

fn record(kind: Kind, container: &str, id: &str, figures: CgroupFigures) -> CgroupRecord {
    CgroupRecord {
        kind,
        pod_uid: "u1".into(),
        pod_id: "podu1".into(),
        pod: "web-0".into(),
        namespace: "shop".into(),
        container: container.into(),
        id: id.into(),
        image: if container.is_empty() {
            "pause:3.9".into()
        } else {
            "busybox".into()
        },
        cgroup: format!("/k8s.io/{id}"),
        started: at(5),
        figures,
        network: Vec::new(),
        nano_cores: None,
    }
}

fn collection() -> Collection {
    let mut sandbox = record(Kind::Sandbox, "", "s1", figures(1_000_000_000, 1 << 20));
    sandbox.network = vec![InterfaceCounters {
        name: "eth0".into(),
        rx_bytes: 100,
        rx_packets: 2,
        ..InterfaceCounters::default()
    }];
    let mut app = figures(2_000_000_000, 8 << 20);
    app.limits.cpu_quota = Some(50_000);
    app.pressure = Pressures {
        cpu: Some(Pressure {
            some: PressureLine {
                total_micros: 3_000_000,
                ..PressureLine::default()
            },
            full: PressureLine {
                total_micros: 1_000_000,
                ..PressureLine::default()
            },
        }),
        memory: None,
        io: None,
    };
    let mut collection = Collection::of(
        at(20),
        vec![sandbox, record(Kind::Container, "app", "c1", app)],
    );
    collection.root = Some(figures(9_000_000_000, 1 << 30));
    collection
}

fn render_it() -> String {
    let names = DeviceNames::new(std::path::Path::new("/nonexistent"));
    render(Some(&collection()), None, &names, at(30))
}

fn line<'a>(text: &'a str, start: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|line| line.starts_with(start))
        .collect()
}

#[test]
fn every_series_carries_the_kubelets_labels_and_none_is_written_twice() {
    let text = render_it();
    let mut seen = BTreeSet::new();
    for sample in text.lines().filter(|line| !line.starts_with('#')) {
        let series = sample.rsplitn(3, ' ').last().expect("a series");
        assert!(seen.insert(series.to_owned()), "twice: {series}");
    }
    assert_eq!(
        line(&text, "container_cpu_usage_seconds_total{"),
        [
            "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"/\",image=\"\",name=\"\",namespace=\"\",pod=\"\"} 9 1800000020000",
            "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"podu1\",image=\"\",name=\"\",namespace=\"shop\",pod=\"web-0\"} 3 1800000020000",
            "container_cpu_usage_seconds_total{container=\"\",cpu=\"total\",id=\"/k8s.io/s1\",image=\"pause:3.9\",name=\"s1\",namespace=\"shop\",pod=\"web-0\"} 1 1800000020000",
            "container_cpu_usage_seconds_total{container=\"app\",cpu=\"total\",id=\"/k8s.io/c1\",image=\"busybox\",name=\"c1\",namespace=\"shop\",pod=\"web-0\"} 2 1800000020000",
        ]
    );
    assert!(text.contains("# HELP container_memory_working_set_bytes Current working set in bytes.\n# TYPE container_memory_working_set_bytes gauge\n"));
    assert!(
        text.contains("container_scrape_error 0\n") && text.contains("machine_scrape_error 1\n")
    );
}

#[test]
fn network_is_the_sandboxs_and_cfs_and_pressure_only_where_the_cgroup_has_them() {
    let text = render_it();
    let received = line(&text, "container_network_receive_bytes_total{");
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(received[0].contains("interface=\"eth0\"") && received[0].contains("name=\"s1\""));
    let throttled = line(&text, "container_cpu_cfs_throttled_periods_total{");
    assert_eq!(
        throttled.len(),
        1,
        "the container under a quota: {throttled:?}"
    );
    assert!(throttled[0].contains("container=\"app\""));
    assert_eq!(
        line(&text, "container_pressure_cpu_waiting_seconds_total{").len(),
        1,
        "some, in seconds"
    );
    assert!(text.contains("container=\"app\",id=\"/k8s.io/c1\",image=\"busybox\",name=\"c1\",namespace=\"shop\",pod=\"web-0\"} 3 "));
    assert!(
        !text.contains("container_pressure_memory"),
        "no memory.pressure: no family"
    );
    let reads = line(&text, "container_fs_reads_bytes_total{");
    assert!(
        reads.iter().all(|line| line.contains("device=\"254:0\"")),
        "{reads:?}"
    );
    // The sum has use, but no limits of its own.
    let quotas = line(&text, "container_spec_cpu_shares{");
    assert!(
        quotas.iter().all(|line| !line.contains("id=\"podu1\"")),
        "{quotas:?}"
    );
    let started = line(&text, "container_start_time_seconds{");
    assert!(
        started.iter().all(|line| line.ends_with(" 1800000005")),
        "no timestamp: {started:?}"
    );
}
