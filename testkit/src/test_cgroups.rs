//! A cgroup root of a test's own (`cgroupRoot: /np-test-…`), so nodes started side by side
//! (and a real kubelet on the same host) never share `kubepods` and one node's orphan cleanup
//! never touches another's pods: made in every hierarchy before the node starts (the kubelet
//! requires the root to exist), and removed with everything below it, processes killed first.

use std::path::{Path, PathBuf};

const CGROUPS: &str = "/sys/fs/cgroup";

/// Every directory a cgroup named `root` has: one per v1 hierarchy (links counted once), or
/// the one v2 directory.
pub fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    let base = Path::new(CGROUPS);
    let relative = root.trim_start_matches('/');
    if base.join("cgroup.controllers").exists() {
        return vec![base.join(relative)];
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_name() == "unified" || !path.join("cgroup.procs").exists() {
            continue;
        }
        let real = std::fs::canonicalize(&path).unwrap_or(path);
        if seen.insert(real.clone()) {
            dirs.push(real.join(relative));
        }
    }
    dirs
}

/// The root a node whose `rootDir` is `root_dir` gets: named after the test's temporary
/// directory, so the [`RootDir`](crate::root_dir::RootDir) that holds it removes it too; a
/// random one (left empty behind) for a `rootDir` outside the temporary directory.
pub fn cgroup_root_for(root_dir: &Path) -> String {
    let tmp = std::env::temp_dir();
    let top = root_dir
        .strip_prefix(&tmp)
        .ok()
        .and_then(|rest| rest.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    match top {
        Some(top) => {
            let name: String = top.chars().filter(char::is_ascii_alphanumeric).collect();
            format!("/np-test-{name}")
        }
        None => format!("/np-test-{:016x}", rand::random::<u64>()),
    }
}

/// Makes `cgroup` (and its missing parents) in every hierarchy, each new cpuset level given
/// its parent's CPUs and memory nodes.
pub fn make_root(cgroup: &str) {
    let mut path = String::new();
    for component in cgroup.split('/').filter(|c| !c.is_empty()) {
        path = format!("{path}/{component}");
        for dir in cgroup_dirs(&path) {
            if dir.is_dir() {
                continue;
            }
            std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("cgroup {}: {e}", dir.display()));
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let Some(parent) = dir.parent() else { continue };
                if let Ok(value) = std::fs::read_to_string(parent.join(file)) {
                    let _ = std::fs::write(dir.join(file), value.trim());
                }
            }
        }
    }
}

/// Removes `root` and everything below it, killing what still runs there.
pub fn remove_root(root: &str) {
    for dir in cgroup_dirs(root) {
        remove_tree(&dir);
    }
}

fn remove_tree(dir: &Path) {
    if !dir.is_dir() {
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path());
        }
    }
    for _ in 0..50 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<&str> = procs.split_whitespace().collect();
        if pids.is_empty() {
            break;
        }
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .args(&pids)
            .status();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir(dir);
}

/// A fresh root of a test's own, removed when dropped.
pub struct TestCgroupRoot(pub String);

impl TestCgroupRoot {
    pub fn new() -> Self {
        let root = format!("/np-test-{:016x}", rand::random::<u64>());
        make_root(&root);
        Self(root)
    }
}

impl Drop for TestCgroupRoot {
    fn drop(&mut self) {
        remove_root(&self.0);
    }
}
