//! The collection's pieces on fixture hosts: pod cgroups named as the kubelet names them,
//! and a cgroup v2 pod's pressure carried to the summary per pod and per container.

use nodepulse_actors::pods::{ContainerRecord, PodRecord, PodsPublisher, SandboxRecord};

use super::*;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

const PRESSURE: &str = "some avg10=1.00 avg60=0.50 avg300=0.25 total=4000\n\
                        full avg10=0.50 avg60=0.25 avg300=0.10 total=1000\n";

/// A cgroup v2 host with one pod (`pod<uid>` cgroup, a sandbox and a container), the
/// processes the runtime would name, and PSI in every cgroup.
fn v2_host(uid: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let cgroups = root.path().join("sys/fs/cgroup");
    write(&cgroups.join("cgroup.controllers"), "cpu memory io pids\n");
    let pod = cgroups.join(format!("kubepods/pod{uid}"));
    for (dir, usec) in [
        (pod.clone(), 9_000),
        (pod.join("s1"), 1_000),
        (pod.join("c1"), 8_000),
    ] {
        write(&dir.join("cpu.stat"), &format!("usage_usec {usec}\n"));
        write(&dir.join("memory.current"), "4096\n");
        write(&dir.join("cpu.pressure"), PRESSURE);
        write(&dir.join("memory.pressure"), PRESSURE);
        write(&dir.join("io.pressure"), PRESSURE);
    }
    for (pid, name) in [(10, "s1"), (11, "c1")] {
        let text = format!("0::/kubepods/pod{uid}/{name}\n");
        write(&root.path().join(format!("proc/{pid}/cgroup")), &text);
    }
    write(
        &root.path().join("proc/10/net/dev"),
        "h\nh\n  eth0: 5 1 0 0 0 0 0 0 6 1 0 0 0 0 0 0\n",
    );
    root
}

#[test]
fn a_pod_cgroups_pressure_reaches_the_summary_per_pod_and_per_container() {
    let uid = "u-1";
    let root = v2_host(uid);
    let host = HostProbe::new(root.path(), std::path::Path::new("/var/lib/kubelet"));
    let publisher = PodsPublisher::default();
    publisher.record(PodRecord {
        uid: uid.into(),
        namespace: "default".into(),
        name: "web".into(),
        deleting: false,
        sandboxes: vec![SandboxRecord {
            id: "s1".into(),
            ready: true,
            created_at: None,
        }],
        containers: vec![ContainerRecord {
            name: "app".into(),
            id: "c1".into(),
            state: ContainerState::Running,
            restart_count: 0,
            log_path: "/var/log/pods/x/app/0.log".into(),
            image: "busybox".into(),
            image_ref: "sha256:1".into(),
            created_at: None,
            started_at: None,
            finished_at: None,
            exit_code: None,
        }],
    });
    let snapshot = publisher.view().snapshot();
    let process = |pid| RuntimeProcess { pid, image: None };
    let processes = [
        ("s1".to_owned(), process(10)),
        ("c1".to_owned(), process(11)),
    ];
    let (known, collection) = read(
        &host,
        wanted(&snapshot),
        HashMap::new(),
        &processes.into_iter().collect(),
        None,
    );
    assert_eq!(known.len(), 2, "both found");
    let kinds: Vec<Kind> = collection.records.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [Kind::Pod, Kind::Sandbox, Kind::Container]);
    let pods = super::super::pods::assemble(&collection, &snapshot);
    let pod = &pods[0];
    let cpu = pod.cpu.as_ref().expect("the pod cgroup's");
    assert_eq!(cpu.usage_core_nano_seconds, Some(9_000_000));
    let psi = cpu.psi.expect("the pod's own pressure");
    assert_eq!((psi.some.total, psi.full.total), (4000, 1000));
    assert!(pod.memory.as_ref().is_some_and(|m| m.psi.is_some()));
    assert!(pod.io.as_ref().is_some_and(|io| io.psi.is_some()));
    let container = &pod.containers[0];
    assert!(container.cpu.as_ref().is_some_and(|c| c.psi.is_some()));
    assert!(container.io.as_ref().is_some_and(|io| io.psi.is_some()));
    assert_eq!(
        pod.network.as_ref().and_then(|n| n.default.rx_bytes),
        Some(5)
    );
}

#[test]
fn a_pod_cgroup_is_the_shared_parent_named_after_the_pods_uid() {
    let uid = "0a1b-2c";
    let cgroupfs = [
        format!("/kubepods/burstable/pod{uid}/c1"),
        format!("/kubepods/burstable/pod{uid}/s1"),
    ];
    assert_eq!(
        pod_cgroup(uid, &cgroupfs).as_deref(),
        Some(format!("/kubepods/burstable/pod{uid}").as_str())
    );
    let systemd = ["/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a1b_2c.slice/cri-containerd-c1.scope".to_owned()];
    assert!(pod_cgroup(uid, &systemd).is_some_and(|pod| pod.ends_with("pod0a1b_2c.slice")));
    // containerd's own, without a cgroup parent: no pod cgroup.
    assert_eq!(
        pod_cgroup(uid, &["/k8s.io/c1".to_owned(), "/k8s.io/s1".to_owned()]),
        None
    );
    // Containers in different parents share no pod cgroup.
    let split = [format!("/a/pod{uid}/c1"), format!("/b/pod{uid}/c2")];
    assert_eq!(pod_cgroup(uid, &split), None);
}
