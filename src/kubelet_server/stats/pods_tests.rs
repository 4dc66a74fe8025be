//! `assemble`'s rules on a collection built in the test: which pods and containers are
//! listed, a pod's figures summed or its own cgroup's, its network its sandbox's.

use nodepulse_actors::{
    pods::{ContainerRecord, PodRecord, PodsPublisher, SandboxRecord},
    ports::ContainerState,
};

use super::*;
use crate::host::{
    cgroup::{CgroupFigures, CgroupMemory, Tasks},
    network::InterfaceCounters,
    pressure::{Pressure, Pressures},
};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("time")
}

fn container(name: &str, id: &str, state: ContainerState) -> ContainerRecord {
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

fn record(kind: Kind, uid: &str, name: &str, cpu: u64, memory: u64) -> CgroupRecord {
    CgroupRecord {
        kind,
        pod_uid: uid.into(),
        pod_id: format!("pod{uid}"),
        pod: format!("{uid}-name"),
        namespace: "default".into(),
        container: name.into(),
        id: format!("{uid}-{name}"),
        image: String::new(),
        cgroup: format!("/k8s.io/{uid}-{name}"),
        started: at(10),
        figures: CgroupFigures {
            cpu_nanos: Some(cpu),
            memory: Some(CgroupMemory {
                usage_bytes: memory * 2,
                working_set_bytes: memory,
                limit_bytes: Some(memory * 4),
                ..CgroupMemory::default()
            }),
            tasks: Tasks {
                processes: Some(1),
                ..Tasks::default()
            },
            ..CgroupFigures::default()
        },
        network: Vec::new(),
        nano_cores: Some(cpu / 10),
    }
}

#[test]
fn pods_are_the_views_running_ones_with_their_cgroups_summed() {
    let publisher = PodsPublisher::default();
    publisher.record(pod(
        "u1",
        true,
        vec![
            container("web", "c-web", ContainerState::Running),
            container("side", "c-side", ContainerState::Running),
        ],
    ));
    // A ready sandbox whose container has not started: listed, with no container.
    publisher.record(pod("u2", true, Vec::new()));
    // Neither a ready sandbox nor a running container: not listed.
    publisher.record(pod(
        "u3",
        false,
        vec![container("x", "c-x", ContainerState::Exited)],
    ));
    let mut sandbox = record(Kind::Sandbox, "u1", "", 100, 10);
    sandbox.network = vec![InterfaceCounters {
        name: "eth0".into(),
        rx_bytes: 7,
        ..InterfaceCounters::default()
    }];
    let collection = Collection::of(
        at(20),
        vec![
            sandbox,
            record(Kind::Container, "u1", "side", 500, 50),
            record(Kind::Container, "u1", "web", 1_000, 100),
        ],
    );
    let pods = assemble(&collection, &publisher.view().snapshot());
    let uids: Vec<&str> = pods.iter().map(|p| p.pod_ref.uid.as_str()).collect();
    assert_eq!(uids, ["u1", "u2"]);
    let first = &pods[0];
    assert_eq!(first.start_time, at(5), "the sandbox's creation");
    let names: Vec<&str> = first.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["side", "web"], "the sandbox is no container");
    let web = &first.containers[1];
    assert_eq!(web.start_time, at(10));
    let web_memory = web.memory.as_ref().expect("memory");
    assert_eq!(
        (web_memory.working_set_bytes, web_memory.available_bytes),
        (Some(100), Some(300)),
        "under its own limit"
    );
    let cpu = first.cpu.as_ref().expect("summed cpu");
    assert_eq!(
        (cpu.time, cpu.usage_core_nano_seconds, cpu.usage_nano_cores),
        (at(20), Some(1_600), Some(160)),
        "the sandbox's and the containers'"
    );
    let memory = first.memory.as_ref().expect("summed memory");
    assert_eq!(
        (memory.working_set_bytes, memory.available_bytes),
        (Some(160), None)
    );
    assert_eq!(
        first.process_stats.as_ref().and_then(|p| p.process_count),
        Some(3)
    );
    let network = first.network.as_ref().expect("the sandbox's network");
    assert_eq!(
        (network.default.name.as_str(), network.default.rx_bytes),
        ("eth0", Some(7))
    );
    assert!(pods[1].containers.is_empty() && pods[1].cpu.is_none());
}

#[test]
fn a_pod_cgroup_gives_the_pods_own_figures_and_pressure() {
    let publisher = PodsPublisher::default();
    publisher.record(pod(
        "u1",
        true,
        vec![container("web", "c-web", ContainerState::Running)],
    ));
    let pressure = Pressure::default();
    let mut own = record(Kind::Pod, "u1", "", 9_000, 900);
    own.figures.pressure = Pressures {
        cpu: Some(pressure),
        memory: None,
        io: Some(pressure),
    };
    let mut web = record(Kind::Container, "u1", "web", 1_000, 100);
    web.figures.pressure.memory = Some(pressure);
    let collection = Collection::of(at(20), vec![own, web]);
    let pods = assemble(&collection, &publisher.view().snapshot());
    let cpu = pods[0].cpu.as_ref().expect("the pod's own");
    assert_eq!(cpu.usage_core_nano_seconds, Some(9_000));
    assert!(
        cpu.psi.is_some() && pods[0].io.is_some(),
        "the pod cgroup's pressure"
    );
    let container = &pods[0].containers[0];
    assert!(container.memory.as_ref().is_some_and(|m| m.psi.is_some()));
    assert!(
        container.cpu.as_ref().is_some_and(|c| c.psi.is_none()),
        "no cpu.pressure"
    );
}
