//! The host's `PodCgroups` on fake cgroup trees in a temporary directory, laid out as the
//! kernel shows them: v1 with one directory per hierarchy (`cpu,cpuacct` and its links, a
//! cpuset with `cpus`/`mems`, the hybrid `unified`), v2 with `cgroup.controllers` and
//! `cgroup.subtree_control`.

use std::path::Path;

use nodepulse_actors::ports::{CgroupDriver, CgroupName, PodCgroups, ResourceConfig};

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A v1 host: `cpu,cpuacct` with its two links, cpuset, memory, pids, the named systemd
/// hierarchy and the hybrid unified one.
fn v1_host() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let cgroups = root.path().join("sys/fs/cgroup");
    for hierarchy in [
        "cpu,cpuacct",
        "cpuset",
        "memory",
        "pids",
        "systemd",
        "unified",
    ] {
        write(&cgroups.join(hierarchy).join("cgroup.procs"), "1\n");
    }
    std::os::unix::fs::symlink("cpu,cpuacct", cgroups.join("cpu")).expect("link");
    std::os::unix::fs::symlink("cpu,cpuacct", cgroups.join("cpuacct")).expect("link");
    write(&cgroups.join("cpuset/cpuset.cpus"), "0-1\n");
    write(&cgroups.join("cpuset/cpuset.mems"), "0\n");
    root
}

fn v2_host() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let cgroups = root.path().join("sys/fs/cgroup");
    write(
        &cgroups.join("cgroup.controllers"),
        "cpuset cpu io memory pids rdma\n",
    );
    write(&cgroups.join("cgroup.subtree_control"), "");
    write(&cgroups.join("cgroup.procs"), "1\n");
    root
}

fn name(parts: &[&str]) -> CgroupName {
    CgroupName::default().child(parts).expect("valid")
}

fn guaranteed() -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(512),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory: Some(64 << 20),
        pids_limit: Some(100),
        ..ResourceConfig::default()
    }
}

#[test]
fn v1_makes_the_cgroup_in_every_hierarchy_with_cpuset_copied_and_limits_written() {
    let host = v1_host();
    let cgroups = HostCgroups::discover(host.path(), CgroupDriver::Cgroupfs).expect("discovered");
    assert!(!cgroups.is_v2());
    let pod = name(&["kubepods", "pod1"]);
    assert!(!cgroups.exists(&pod));
    cgroups.ensure(&pod, &guaranteed()).expect("made");
    assert!(cgroups.exists(&pod));
    let at = |hierarchy: &str, file: &str| {
        host.path()
            .join("sys/fs/cgroup")
            .join(hierarchy)
            .join("kubepods/pod1")
            .join(file)
    };
    assert_eq!(read(&at("cpu,cpuacct", "cpu.shares")), "512");
    assert_eq!(read(&at("cpu,cpuacct", "cpu.cfs_period_us")), "100000");
    assert_eq!(read(&at("cpu,cpuacct", "cpu.cfs_quota_us")), "50000");
    assert_eq!(read(&at("memory", "memory.limit_in_bytes")), "67108864");
    assert_eq!(read(&at("pids", "pids.max")), "100");
    assert_eq!(read(&at("cpuset", "cpuset.cpus")), "0-1");
    assert_eq!(read(&at("cpuset", "cpuset.mems")), "0");
    let kubepods_cpuset = host
        .path()
        .join("sys/fs/cgroup/cpuset/kubepods/cpuset.cpus");
    assert_eq!(
        read(&kubepods_cpuset),
        "0-1",
        "every new cpuset level gets its parent's"
    );
    assert!(at("systemd", "").is_dir(), "the named hierarchy too");
    assert!(!host.path().join("sys/fs/cgroup/unified/kubepods").exists());
    assert!(
        !at("cpuset", "cpu.shares").exists(),
        "only the hierarchy's own files"
    );

    assert_eq!(
        cgroups.children(&name(&["kubepods"])).expect("listed"),
        ["pod1"]
    );
    cgroups.destroy(&pod).expect("removed");
    assert!(!cgroups.exists(&pod));
    assert!(!at("memory", "").exists() && !at("systemd", "").exists());
    cgroups
        .destroy(&pod)
        .expect("nothing to remove is no error");
}

#[test]
fn updating_a_missing_cgroup_names_it_and_writes_nothing() {
    let host = v1_host();
    let cgroups = HostCgroups::discover(host.path(), CgroupDriver::Cgroupfs).expect("discovered");
    let error = cgroups
        .update(&name(&["system"]), &guaranteed())
        .expect_err("missing");
    assert!(error.to_string().contains("system"), "{error}");
    assert!(!host.path().join("sys/fs/cgroup/memory/system").exists());
}

#[test]
fn v2_delegates_the_controllers_down_and_writes_weight_max_and_memory_max() {
    let host = v2_host();
    let cgroups = HostCgroups::discover(host.path(), CgroupDriver::Cgroupfs).expect("discovered");
    assert!(cgroups.is_v2());
    let pod = name(&["kubepods", "besteffort", "pod1"]);
    cgroups.ensure(&pod, &guaranteed()).expect("made");
    let base = host.path().join("sys/fs/cgroup");
    assert_eq!(
        read(&base.join("cgroup.subtree_control")),
        "+cpu +cpuset +memory +pids"
    );
    let dir = base.join("kubepods/besteffort/pod1");
    assert_eq!(read(&dir.join("cpu.weight")), "20");
    assert_eq!(read(&dir.join("cpu.max")), "50000 100000");
    assert_eq!(read(&dir.join("memory.max")), "67108864");
    assert_eq!(read(&dir.join("pids.max")), "100");
    assert!(cgroups.exists(&pod));
    cgroups
        .destroy(&name(&["kubepods", "besteffort"]))
        .expect("removed with its pods");
    assert!(!dir.exists() && base.join("kubepods").is_dir());
}

#[test]
fn the_systemd_driver_writes_the_expanded_slices() {
    let host = v2_host();
    let cgroups = HostCgroups::discover(host.path(), CgroupDriver::Systemd).expect("discovered");
    cgroups
        .ensure(
            &name(&["kubepods", "burstable", "pod1-2"]),
            &ResourceConfig::default(),
        )
        .expect("made");
    assert!(host
        .path()
        .join("sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice")
        .is_dir());
    assert_eq!(
        cgroups
            .children(&name(&["kubepods", "burstable"]))
            .expect("listed"),
        ["kubepods-burstable-pod1_2.slice"]
    );
}
