//! One named cgroup's figures, as cAdvisor gives the kubelet a raw cgroup's (the summary's
//! `systemContainers`): CPU time, memory, pressure and its creation time; and the cgroup a
//! process is in, as the kubelet's `getContainer` finds its own. Paths are read under the
//! host root; cgroup v2 (one hierarchy) or v1 (`cpuacct` and `memory`, which must agree).

use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use nodepulse_actors::ports::HostError;

use super::{
    memory::{MemoryFigures, node_memory_figures, stat_field},
    pressure::{Layout, Pressures, pressures},
    read,
};

/// A limit at or above this is "unlimited" (the kubelet's `isMemoryUnlimited`: 2^62, not
/// `u64::MAX`, as the kernel rounds what it reports).
const UNLIMITED_MEMORY: u64 = 1 << 62;

/// What one cgroup reports.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupFigures {
    /// The cgroup directories' oldest modification time (cAdvisor's `CreationTime`).
    pub created: Option<SystemTime>,
    pub cpu_nanos: Option<u64>,
    pub memory: Option<CgroupMemory>,
    pub pressure: Pressures,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupMemory {
    pub usage_bytes: u64,
    pub working_set_bytes: u64,
    /// The cgroup's limit when it has one.
    pub limit_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// Whether `root`'s cgroups are one v2 hierarchy.
fn unified(root: &Path) -> bool {
    root.join("sys/fs/cgroup/cgroup.controllers").exists()
}

fn dir(base: &Path, name: &str) -> PathBuf {
    base.join(name.trim_start_matches('/'))
}

/// The cgroup a process is in, from its `/proc/<pid>/cgroup` text: the v2 (`0::`) path on a
/// unified host, else the `cpu` one, which must be the `memory` one too (the kubelet accounts
/// both in one cgroup and refuses otherwise).
pub fn process_cgroup(path: &Path, text: &str, unified_host: bool) -> Result<String, HostError> {
    let invalid = |message: String| HostError::Parse {
        path: path.to_owned(),
        message,
    };
    let mut unified_path = None;
    let (mut cpu, mut memory) = (None, None);
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(cgroup)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            unified_path = Some(cgroup);
        }
        for controller in controllers.split(',') {
            match controller {
                "cpu" => cpu = Some(cgroup),
                "memory" => memory = Some(cgroup),
                _ => {}
            }
        }
    }
    if unified_host {
        return unified_path
            .map(str::to_owned)
            .ok_or_else(|| invalid("no unified (0::) cgroup".to_owned()));
    }
    match (cpu, memory) {
        (Some(cpu), Some(memory)) if cpu == memory => Ok(cpu.to_owned()),
        (Some(cpu), Some(memory)) => Err(invalid(format!(
            "cpu and memory cgroup hierarchy not unified.  cpu: {cpu}, memory: {memory}"
        ))),
        (None, _) => Err(invalid("no cpu cgroup".to_owned())),
        (_, None) => Err(invalid("no memory cgroup".to_owned())),
    }
}

/// This process's cgroup (what the kubelet's summary names `kubelet` when `kubeletCgroups` is
/// unset), judged by `root`'s hierarchy.
pub fn own_cgroup(root: &Path) -> Result<String, HostError> {
    let path = Path::new("/proc/self/cgroup");
    process_cgroup(path, &read(path)?, unified(root))
}

/// `name`'s figures; an error when the cgroup does not exist.
pub fn cgroup_figures(root: &Path, name: &str) -> Result<CgroupFigures, HostError> {
    let cgroups = root.join("sys/fs/cgroup");
    if unified(root) {
        let dir = dir(&cgroups, name);
        exists(&dir)?;
        let cpu_nanos = std::fs::read_to_string(dir.join("cpu.stat"))
            .ok()
            .and_then(|stat| stat_field(&stat, "usage_usec"))
            .map(|usec| usec.saturating_mul(1_000));
        let memory = if name == "/" {
            // The root has no memory.current: the node's figures are its.
            node_memory_figures(root).ok().map(root_memory)
        } else {
            v2_memory(&dir)
        };
        return Ok(CgroupFigures {
            created: created(std::slice::from_ref(&dir), "cgroup.events"),
            cpu_nanos,
            memory,
            pressure: pressures(Layout::Cgroup(&dir)),
        });
    }
    let cpu_dir = ["cpuacct", "cpu,cpuacct"]
        .iter()
        .map(|hierarchy| dir(&cgroups.join(hierarchy), name))
        .find(|dir| dir.exists());
    let memory_dir = dir(&cgroups.join("memory"), name);
    let Some(cpu_dir) = cpu_dir else {
        return Err(missing(&dir(&cgroups.join("cpuacct"), name)));
    };
    exists(&memory_dir)?;
    let cpu_nanos = std::fs::read_to_string(cpu_dir.join("cpuacct.usage"))
        .ok()
        .and_then(|text| text.trim().parse().ok());
    Ok(CgroupFigures {
        created: created(&[cpu_dir, memory_dir.clone()], "cgroup.clone_children"),
        cpu_nanos,
        memory: v1_memory(&memory_dir),
        // cgroup v1 controllers have no pressure files (cAdvisor's v1 reader has none either).
        pressure: Pressures::default(),
    })
}

fn exists(dir: &Path) -> Result<(), HostError> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(missing(dir))
    }
}

fn missing(dir: &Path) -> HostError {
    HostError::Read {
        path: dir.to_owned(),
        message: "no such cgroup".to_owned(),
    }
}

fn number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// cAdvisor's creation time: the oldest of the directories' and a rarely touched file's
/// modification times (a directory's changes whenever a child cgroup is made).
fn created(dirs: &[PathBuf], steady_file: &str) -> Option<SystemTime> {
    dirs.iter()
        .flat_map(|dir| [dir.clone(), dir.join(steady_file)])
        .filter_map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .min()
}

fn root_memory(figures: MemoryFigures) -> CgroupMemory {
    CgroupMemory {
        usage_bytes: figures.usage_bytes,
        working_set_bytes: figures.working_set_bytes,
        limit_bytes: Some(figures.capacity_bytes),
        rss_bytes: figures.rss_bytes,
        page_faults: figures.page_faults,
        major_page_faults: figures.major_page_faults,
    }
}

/// cgroup v2: `memory.current`, less `inactive_file` for the working set, `anon` as RSS.
fn v2_memory(dir: &Path) -> Option<CgroupMemory> {
    let usage = number(&dir.join("memory.current"))?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let field = |name| stat_field(&stat, name);
    Some(CgroupMemory {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(field("inactive_file").unwrap_or(0)),
        // `max` does not parse: no limit.
        limit_bytes: number(&dir.join("memory.max")).filter(|limit| *limit < UNLIMITED_MEMORY),
        rss_bytes: field("anon"),
        page_faults: field("pgfault"),
        major_page_faults: field("pgmajfault"),
    })
}

/// cgroup v1 with hierarchical accounting, as cAdvisor reads it: `total_` counters, but the
/// page faults under their plain names.
fn v1_memory(dir: &Path) -> Option<CgroupMemory> {
    let usage = number(&dir.join("memory.usage_in_bytes"))?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let field = |name| stat_field(&stat, name);
    Some(CgroupMemory {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(field("total_inactive_file").unwrap_or(0)),
        limit_bytes: number(&dir.join("memory.limit_in_bytes"))
            .filter(|limit| *limit < UNLIMITED_MEMORY),
        rss_bytes: field("total_rss"),
        page_faults: field("pgfault"),
        major_page_faults: field("pgmajfault"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "9:name=systemd:/\n4:memory:/jobs/a\n2:cpuacct:/\n1:cpu:/jobs/a\n0::/\n";

    #[test]
    fn a_process_cgroup_is_the_unified_path_or_the_agreeing_cpu_and_memory_one() {
        let path = Path::new("/proc/self/cgroup");
        assert_eq!(
            process_cgroup(path, "0::/system.slice/nodepulse.service\n", true).expect("v2"),
            "/system.slice/nodepulse.service"
        );
        assert_eq!(process_cgroup(path, V1, false).expect("v1"), "/jobs/a");
        let error = process_cgroup(path, "4:memory:/b\n3:cpu,cpuacct:/a\n", false)
            .expect_err("cpu and memory differ");
        assert!(error.to_string().contains("not unified"), "{error}");
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_v2_cgroup_gives_cpu_memory_and_pressure_and_an_unknown_one_is_an_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let cgroups = root.path().join("sys/fs/cgroup");
        write(&cgroups.join("cgroup.controllers"), "cpu memory io\n");
        let unit = cgroups.join("runtime.slice");
        write(&unit.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n");
        write(&unit.join("memory.current"), "10000\n");
        write(&unit.join("memory.max"), "max\n");
        write(
            &unit.join("memory.stat"),
            "anon 6000\nfile 4000\ninactive_file 3000\npgfault 7\npgmajfault 1\n",
        );
        write(&unit.join("io.pressure"), "some total=4\nfull total=2\n");
        let figures = cgroup_figures(root.path(), "/runtime.slice").expect("figures");
        assert_eq!(figures.cpu_nanos, Some(1_500_000));
        assert_eq!(
            figures.memory,
            Some(CgroupMemory {
                usage_bytes: 10_000,
                working_set_bytes: 7_000,
                limit_bytes: None,
                rss_bytes: Some(6_000),
                page_faults: Some(7),
                major_page_faults: Some(1),
            })
        );
        assert_eq!(figures.pressure.io.map(|p| p.full.total_micros), Some(2));
        assert_eq!(figures.pressure.cpu, None);
        assert!(figures.created.is_some());
        let error = cgroup_figures(root.path(), "/gone.slice").expect_err("missing");
        assert!(error.to_string().contains("gone.slice"), "{error}");
    }

    #[test]
    fn a_v1_cgroup_reads_cpuacct_and_the_hierarchical_memory_counters() {
        let root = tempfile::tempdir().expect("tempdir");
        let cgroups = root.path().join("sys/fs/cgroup");
        write(&cgroups.join("cpuacct/misc/cpuacct.usage"), "123456\n");
        write(&cgroups.join("memory/misc/memory.usage_in_bytes"), "8192\n");
        write(
            &cgroups.join("memory/misc/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        write(
            &cgroups.join("memory/misc/memory.stat"),
            "rss 1\ntotal_rss 4096\ntotal_inactive_file 1024\npgfault 9\npgmajfault 2\n",
        );
        let figures = cgroup_figures(root.path(), "/misc").expect("figures");
        assert_eq!(figures.cpu_nanos, Some(123_456));
        let memory = figures.memory.expect("memory");
        assert_eq!(
            (
                memory.working_set_bytes,
                memory.rss_bytes,
                memory.limit_bytes
            ),
            (7_168, Some(4_096), None)
        );
        assert_eq!(figures.pressure, Pressures::default());
    }
}
