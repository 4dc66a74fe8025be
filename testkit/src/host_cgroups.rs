//! The host's cgroups as a test reads them itself, to check what the kubelet API reports of
//! them: whether the hierarchy is v2, the cgroup this process is in (when the kubelet's rule
//! finds one), a pressure file's `some` total, a cgroup's CPU time; and a cgroup of the test's
//! own with a busy process in it, removed when dropped.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
};

const CGROUPS: &str = "/sys/fs/cgroup";

pub fn unified() -> bool {
    Path::new(CGROUPS).join("cgroup.controllers").exists()
}

fn under(base: &Path, cgroup: &str) -> PathBuf {
    base.join(cgroup.trim_start_matches('/'))
}

/// This process's cgroup by `/proc/self/cgroup`: the `0::` path on v2; on v1 the `cpu` one
/// when the `memory` one is the same, else none (the kubelet refuses to account it).
pub fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").expect("/proc/self/cgroup");
    let path_of = |wanted: &str| {
        text.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = if wanted.is_empty() {
                controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == wanted)
            };
            matches.then(|| path.to_owned())
        })
    };
    if unified() {
        return path_of("");
    }
    let cpu = path_of("cpu")?;
    (path_of("memory").as_ref() == Some(&cpu)).then_some(cpu)
}

/// The `some` line's `total` of a pressure file, if the kernel writes the file.
pub fn some_total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|line| line.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    Some(total.parse().expect("a total"))
}

/// The node's pressure file for `resource` (`cpu`, `memory`, `io`): the root cgroup's on v2,
/// else the kernel's `/proc/pressure/`; `None` when neither exists.
pub fn node_pressure_file(resource: &str) -> Option<PathBuf> {
    [
        Path::new(CGROUPS).join(format!("{resource}.pressure")),
        Path::new("/proc/pressure").join(resource),
    ]
    .into_iter()
    .find(|path| path.exists())
}

/// A cgroup of the test's own (`/nodepulse-test-<test>-<pid>`) in the hierarchies that account
/// CPU and memory, with a shell that counts for a while and then sleeps.
pub struct TestCgroup {
    pub name: String,
    dirs: Vec<PathBuf>,
    child: Child,
}

impl TestCgroup {
    pub fn start(test: &str) -> Self {
        let name = format!("/nodepulse-test-{test}-{}", std::process::id());
        let base = Path::new(CGROUPS);
        let dirs = if unified() {
            vec![under(base, &name)]
        } else {
            let cpu = ["cpuacct", "cpu,cpuacct"]
                .iter()
                .map(|hierarchy| base.join(hierarchy))
                .find(|hierarchy| hierarchy.exists())
                .expect("a cpuacct hierarchy");
            vec![under(&cpu, &name), under(&base.join("memory"), &name)]
        };
        for dir in &dirs {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        }
        let child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 600",
            ])
            .spawn()
            .expect("sh runs");
        let cgroup = Self { name, dirs, child };
        for dir in &cgroup.dirs {
            std::fs::write(dir.join("cgroup.procs"), cgroup.child.id().to_string())
                .unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        }
        cgroup
    }

    /// Its CPU time in nanoseconds, as the kernel counts it now.
    pub fn cpu_nanos(&self) -> u64 {
        let dir = &self.dirs[0];
        if unified() {
            let stat = std::fs::read_to_string(dir.join("cpu.stat")).expect("cpu.stat");
            let usec = stat
                .lines()
                .find_map(|line| line.strip_prefix("usage_usec "))
                .expect("usage_usec");
            usec.trim().parse::<u64>().expect("a number") * 1_000
        } else {
            let usage = std::fs::read_to_string(dir.join("cpuacct.usage")).expect("cpuacct.usage");
            usage.trim().parse().expect("a number")
        }
    }

    /// Its own CPU pressure file (cgroup v2 only; v1 controllers have none).
    pub fn cpu_pressure_file(&self) -> Option<PathBuf> {
        let path = self.dirs[0].join("cpu.pressure");
        (unified() && path.exists()).then_some(path)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for dir in &self.dirs {
            // Empty once the shell has gone; the kernel may take a moment to let it go.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}
