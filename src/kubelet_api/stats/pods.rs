//! Each running pod's and container's CPU and memory. Containers from CRI
//! `ListContainerStats`, named by the kubelet's labels, their start time and state from the
//! node's pods view (terminated instances are dropped, as the kubelet drops them); pods are the
//! view's pods with a ready sandbox or a running container. A pod's own figures come from
//! `ListPodSandboxStats` when the runtime has them; containerd answers them only for a sandbox
//! with a cgroup parent, which nodepulse does not set, so they are the sum of its containers'
//! (the kubelet's fallback when it has no pod cgroup stats).

use std::collections::BTreeMap;

use jiff::Timestamp;
use nodepulse_actors::{
    pods::{
        PodsSnapshot,
        cri::{CONTAINER_NAME_LABEL, POD_UID_LABEL},
    },
    ports::{
        ContainerState, ContainerStatsFilter, ContainerUsage, CpuUsage, MemoryUsage, RuntimeStats,
        SandboxStatsFilter, SandboxUsage,
    },
};

use super::{
    StatsError,
    node::{interface, network},
    summary::{ContainerStats, CpuStats, MemoryStats, PodReference, PodStats, ProcessStats},
};

fn time(nanos: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn cpu(usage: &CpuUsage) -> CpuStats {
    CpuStats {
        time: time(usage.timestamp),
        usage_nano_cores: usage.usage_nano_cores,
        usage_core_nano_seconds: usage.usage_core_nano_seconds,
        psi: None,
    }
}

fn memory(usage: &MemoryUsage) -> MemoryStats {
    MemoryStats {
        time: time(usage.timestamp),
        available_bytes: usage.available_bytes,
        usage_bytes: usage.usage_bytes,
        working_set_bytes: usage.working_set_bytes,
        rss_bytes: usage.rss_bytes,
        page_faults: usage.page_faults,
        major_page_faults: usage.major_page_faults,
        psi: None,
    }
}

/// What the runtime answered for the running containers and the sandboxes.
pub struct RuntimeFigures {
    pub containers: Vec<ContainerUsage>,
    pub sandboxes: Vec<SandboxUsage>,
}

pub async fn runtime_figures(runtime: &impl RuntimeStats) -> Result<RuntimeFigures, StatsError> {
    let (containers, sandboxes) = futures::join!(
        runtime.list_container_stats(ContainerStatsFilter::default()),
        runtime.list_pod_sandbox_stats(SandboxStatsFilter::default()),
    );
    // Sandbox figures are a refinement: without them the containers' sums stand in.
    let sandboxes = sandboxes.unwrap_or_else(|error| {
        tracing::debug!(%error, "no pod sandbox stats; summing the containers'");
        Vec::new()
    });
    Ok(RuntimeFigures {
        containers: containers?,
        sandboxes,
    })
}

/// The sum of a field over `items`, `None` when none has it.
fn total<T>(items: &[T], field: impl Fn(&T) -> Option<u64>) -> Option<u64> {
    items
        .iter()
        .filter_map(field)
        .reduce(|total, value| total.saturating_add(value))
}

fn summed_cpu(containers: &[ContainerStats]) -> Option<CpuStats> {
    let figures: Vec<&CpuStats> = containers.iter().filter_map(|c| c.cpu.as_ref()).collect();
    let time = figures.iter().map(|cpu| cpu.time).max()?;
    Some(CpuStats {
        time,
        usage_nano_cores: total(&figures, |cpu| cpu.usage_nano_cores),
        usage_core_nano_seconds: total(&figures, |cpu| cpu.usage_core_nano_seconds),
        // The pod's pressure is its own cgroup's: no sum of the containers' stands in.
        psi: None,
    })
}

fn summed_memory(containers: &[ContainerStats]) -> Option<MemoryStats> {
    let figures: Vec<&MemoryStats> = containers
        .iter()
        .filter_map(|c| c.memory.as_ref())
        .collect();
    let time = figures.iter().map(|memory| memory.time).max()?;
    Some(MemoryStats {
        time,
        // Each container's is against its own limit: their sum means nothing.
        available_bytes: None,
        usage_bytes: total(&figures, |memory| memory.usage_bytes),
        working_set_bytes: total(&figures, |memory| memory.working_set_bytes),
        rss_bytes: total(&figures, |memory| memory.rss_bytes),
        page_faults: total(&figures, |memory| memory.page_faults),
        major_page_faults: total(&figures, |memory| memory.major_page_faults),
        psi: None,
    })
}

/// The pods' CPU and memory stats, in UID order, containers by name; pure, for the tests.
pub fn assemble(figures: &RuntimeFigures, snapshot: &PodsSnapshot) -> Vec<PodStats> {
    let mut containers: BTreeMap<&str, Vec<ContainerStats>> = BTreeMap::new();
    for usage in &figures.containers {
        let Some(uid) = usage.labels.get(POD_UID_LABEL) else {
            continue;
        };
        // Only what the view knows runs: it has the start time, and a terminated instance
        // the runtime still lists is not the container's figure.
        let record = snapshot
            .by_uid(uid)
            .and_then(|pod| pod.containers.iter().find(|c| c.id == usage.id))
            .filter(|record| record.state == ContainerState::Running);
        let Some(start_time) = record.and_then(|record| record.created_at.or(record.started_at))
        else {
            continue;
        };
        containers.entry(uid).or_default().push(ContainerStats {
            name: (usage.labels.get(CONTAINER_NAME_LABEL).cloned())
                .unwrap_or_else(|| usage.name.clone()),
            start_time,
            cpu: usage.cpu.as_ref().map(cpu),
            memory: usage.memory.as_ref().map(memory),
            io: None,
            rootfs: None,
            logs: None,
        });
    }
    let mut pods = Vec::new();
    for pod in snapshot.pods() {
        let mut running = containers.remove(pod.uid.as_str()).unwrap_or_default();
        let sandbox_ready = pod.sandboxes.first().is_some_and(|sandbox| sandbox.ready);
        if !sandbox_ready && running.is_empty() {
            continue;
        }
        running.sort_by(|a, b| a.name.cmp(&b.name));
        let sandbox = (figures.sandboxes.iter()).find(|sandbox| sandbox.metadata.uid == pod.uid);
        let start_time = (pod.sandboxes.first().and_then(|sandbox| sandbox.created_at))
            .or_else(|| running.iter().map(|c| c.start_time).min())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        pods.push(PodStats {
            pod_ref: PodReference {
                name: pod.name.clone(),
                namespace: pod.namespace.clone(),
                uid: pod.uid.clone(),
            },
            start_time,
            cpu: (sandbox.and_then(|s| s.cpu.as_ref()).map(cpu)).or_else(|| summed_cpu(&running)),
            memory: (sandbox.and_then(|s| s.memory.as_ref()).map(memory))
                .or_else(|| summed_memory(&running)),
            io: None,
            network: sandbox.and_then(|s| s.network.as_ref()).map(|usage| {
                let mut interfaces: Vec<_> = usage.default_interface.iter().cloned().collect();
                interfaces.extend(usage.interfaces.iter().cloned());
                let mut stats = network(time(usage.timestamp), interfaces);
                if let Some(default) = usage.default_interface.clone() {
                    stats.default = interface(default);
                }
                stats
            }),
            process_stats: sandbox
                .and_then(|s| s.process_count)
                .map(|count| ProcessStats {
                    process_count: Some(count),
                }),
            containers: running,
            volume_stats: Vec::new(),
            ephemeral_storage: None,
        });
    }
    pods.sort_by(|a, b| a.pod_ref.uid.cmp(&b.pod_ref.uid));
    pods
}

#[cfg(test)]
mod tests {
    use nodepulse_actors::pods::{ContainerRecord, PodRecord, PodsPublisher, SandboxRecord};

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("time")
    }

    fn record(name: &str, id: &str, state: ContainerState) -> ContainerRecord {
        ContainerRecord {
            name: name.into(),
            id: id.into(),
            state,
            restart_count: 0,
            log_path: format!("/var/log/pods/x/{name}/0.log").into(),
            image: "busybox".into(),
            image_ref: "sha256:1".into(),
            created_at: Some(at(10)),
            started_at: Some(at(11)),
            finished_at: None,
            exit_code: None,
        }
    }

    fn pod(uid: &str, ready: bool, containers: Vec<ContainerRecord>) -> PodRecord {
        PodRecord {
            uid: uid.into(),
            namespace: "default".into(),
            name: format!("{uid}-name"),
            deleting: false,
            sandboxes: vec![SandboxRecord {
                id: format!("{uid}-sandbox"),
                ready,
                created_at: Some(at(5)),
            }],
            containers,
        }
    }

    fn usage(uid: &str, name: &str, id: &str, cpu: u64, memory: u64) -> ContainerUsage {
        let labels = [(POD_UID_LABEL, uid), (CONTAINER_NAME_LABEL, name)]
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        ContainerUsage {
            id: id.into(),
            name: name.into(),
            labels,
            cpu: Some(CpuUsage {
                timestamp: at(20).as_nanosecond() as i64,
                usage_core_nano_seconds: Some(cpu),
                usage_nano_cores: Some(cpu / 10),
            }),
            memory: Some(MemoryUsage {
                timestamp: at(21).as_nanosecond() as i64,
                working_set_bytes: Some(memory),
                ..MemoryUsage::default()
            }),
            ..ContainerUsage::default()
        }
    }

    #[test]
    fn pods_are_the_views_running_ones_with_their_running_containers_summed() {
        let publisher = PodsPublisher::default();
        publisher.record(pod(
            "u1",
            true,
            vec![
                record("web", "c-web", ContainerState::Running),
                record("side", "c-side", ContainerState::Running),
                record("web", "c-old", ContainerState::Exited),
            ],
        ));
        // A ready sandbox whose container has not started: listed, with no figures.
        publisher.record(pod("u2", true, Vec::new()));
        // Neither a ready sandbox nor a running container: not listed.
        publisher.record(pod(
            "u3",
            false,
            vec![record("x", "c-x", ContainerState::Exited)],
        ));
        let figures = RuntimeFigures {
            containers: vec![
                usage("u1", "web", "c-web", 1_000, 100),
                usage("u1", "side", "c-side", 500, 50),
                // The runtime still lists the exited instance and one it has not published.
                usage("u1", "web", "c-old", 9_000, 900),
                usage("u1", "new", "c-unknown", 9_000, 900),
                usage("u3", "x", "c-x", 9_000, 900),
            ],
            sandboxes: Vec::new(),
        };
        let pods = assemble(&figures, &publisher.view().snapshot());
        let uids: Vec<&str> = pods.iter().map(|p| p.pod_ref.uid.as_str()).collect();
        assert_eq!(uids, ["u1", "u2"]);
        let first = &pods[0];
        assert_eq!(first.start_time, at(5), "the sandbox's creation");
        let names: Vec<&str> = first.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["side", "web"]);
        assert_eq!(first.containers[1].start_time, at(10));
        let cpu = first.cpu.as_ref().expect("summed cpu");
        assert_eq!(
            (cpu.time, cpu.usage_core_nano_seconds, cpu.usage_nano_cores),
            (at(20), Some(1_500), Some(150))
        );
        let memory = first.memory.as_ref().expect("summed memory");
        assert_eq!(
            (memory.working_set_bytes, memory.available_bytes),
            (Some(150), None)
        );
        assert!(pods[1].containers.is_empty() && pods[1].cpu.is_none());
    }
}
