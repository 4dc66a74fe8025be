//! A cgroup on cgroup v1, as cAdvisor's v1 reader (runc's `fs` manager) reads it: each
//! controller in its own hierarchy (`cpu` and `cpuacct` perhaps joined), the memory figures
//! with hierarchical accounting (`total_` counters, the page faults under both names), block
//! I/O from the throttling policy's counters (kept whatever the scheduler), no pressure (v1
//! controllers have no pressure files, nor has cAdvisor's v1 reader).

use std::path::{Path, PathBuf};

use nodepulse_actors::ports::HostError;

use super::{
    CgroupFigures, CgroupMemory, CpuDetail, Limits, Tasks, count_lines, created, dir, exists, io,
    limited, missing, number, pairs,
};
use crate::host::pressure::Pressures;

/// `/proc/<pid>/stat` and `cpuacct.stat` count in USER_HZ, which Linux fixes at 100.
const NANOS_PER_TICK: u64 = 10_000_000;

/// The first of `hierarchies` (mount names under `/sys/fs/cgroup`) that holds `name`.
fn controller(cgroups: &Path, hierarchies: &[&str], name: &str) -> Option<PathBuf> {
    hierarchies
        .iter()
        .map(|hierarchy| dir(&cgroups.join(hierarchy), name))
        .find(|dir| dir.is_dir())
}

pub fn figures(cgroups: &Path, name: &str) -> Result<CgroupFigures, HostError> {
    let Some(cpuacct) = controller(cgroups, &["cpuacct", "cpu,cpuacct"], name) else {
        return Err(missing(&dir(&cgroups.join("cpuacct"), name)));
    };
    let memory_dir = dir(&cgroups.join("memory"), name);
    exists(&memory_dir)?;
    let cpu_dir = controller(cgroups, &["cpu", "cpu,cpuacct"], name);
    let ticks = std::fs::read_to_string(cpuacct.join("cpuacct.stat")).unwrap_or_default();
    let ticks = pairs(&ticks);
    let cpu_stat = (cpu_dir.as_ref())
        .and_then(|dir| std::fs::read_to_string(dir.join("cpu.stat")).ok())
        .unwrap_or_default();
    let cpu_stat = pairs(&cpu_stat);
    let cpu = CpuDetail {
        user_nanos: ticks("user").map(|t| t.saturating_mul(NANOS_PER_TICK)),
        system_nanos: ticks("system").map(|t| t.saturating_mul(NANOS_PER_TICK)),
        periods: cpu_stat("nr_periods"),
        throttled_periods: cpu_stat("nr_throttled"),
        throttled_nanos: cpu_stat("throttled_time"),
    };
    let pids = controller(cgroups, &["pids"], name);
    let tasks = Tasks {
        processes: count_lines(&cpuacct.join("cgroup.procs")),
        threads: pids
            .as_ref()
            .and_then(|dir| number(&dir.join("pids.current"))),
        // `max` does not parse: no limit.
        threads_max: pids.as_ref().and_then(|dir| number(&dir.join("pids.max"))),
    };
    let cpu_file = |file: &str| cpu_dir.as_ref().and_then(|dir| number(&dir.join(file)));
    let limits = Limits {
        cpu_shares: cpu_file("cpu.shares"),
        cpu_period: cpu_file("cpu.cfs_period_us"),
        // `-1` (no quota) does not parse as a u64, as cAdvisor's reader leaves it at 0.
        cpu_quota: cpu_file("cpu.cfs_quota_us").filter(|quota| *quota > 0),
        memory_limit: limited(number(&memory_dir.join("memory.limit_in_bytes"))),
        swap_limit: limited(number(&memory_dir.join("memory.memsw.limit_in_bytes"))),
        memory_reservation: limited(number(&memory_dir.join("memory.soft_limit_in_bytes"))),
    };
    let blkio = controller(cgroups, &["blkio"], name);
    Ok(CgroupFigures {
        created: created(
            &[cpuacct.clone(), memory_dir.clone()],
            "cgroup.clone_children",
        ),
        cpu_nanos: number(&cpuacct.join("cpuacct.usage")),
        cpu,
        memory: memory(&memory_dir),
        io: blkio.map(|dir| block_io(&dir)).unwrap_or_default(),
        tasks,
        limits,
        pressure: Pressures::default(),
    })
}

/// The throttling policy's counters (the `_recursive` ones where the kernel has them, so a
/// cgroup counts its children as cAdvisor's figures do).
fn block_io(dir: &Path) -> Vec<io::DeviceIo> {
    let text = |name: &str| {
        std::fs::read_to_string(dir.join(format!("{name}_recursive")))
            .or_else(|_| std::fs::read_to_string(dir.join(name)))
            .unwrap_or_default()
    };
    io::from_blkio(
        &text("blkio.throttle.io_service_bytes"),
        &text("blkio.throttle.io_serviced"),
    )
}

/// With hierarchical accounting, as cAdvisor reads it: `total_` counters, but the page
/// faults under both names (the container's own and its hierarchy's).
fn memory(dir: &Path) -> Option<CgroupMemory> {
    let usage = number(&dir.join("memory.usage_in_bytes"))?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let field = pairs(&stat);
    let oom = std::fs::read_to_string(dir.join("memory.oom_control")).unwrap_or_default();
    let inactive_file = field("total_inactive_file");
    Some(CgroupMemory {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(inactive_file.unwrap_or(0)),
        limit_bytes: limited(number(&dir.join("memory.limit_in_bytes"))),
        rss_bytes: field("total_rss"),
        page_faults: field("pgfault"),
        major_page_faults: field("pgmajfault"),
        hierarchy_page_faults: field("total_pgfault"),
        hierarchy_major_page_faults: field("total_pgmajfault"),
        cache_bytes: field("total_cache"),
        mapped_file_bytes: field("total_mapped_file"),
        // Without swap accounting (no memsw files) the kernel keeps no figure: none is used.
        swap_bytes: Some(
            number(&dir.join("memory.memsw.usage_in_bytes"))
                .map_or(0, |memsw| memsw.saturating_sub(usage)),
        ),
        kernel_bytes: number(&dir.join("memory.kmem.usage_in_bytes")),
        active_file_bytes: field("total_active_file"),
        inactive_file_bytes: inactive_file,
        max_usage_bytes: number(&dir.join("memory.max_usage_in_bytes")),
        failcnt: number(&dir.join("memory.failcnt")),
        oom_kills: pairs(&oom)("oom_kill"),
    })
}

#[cfg(test)]
mod tests {
    use super::{super::tests::write, *};

    #[test]
    fn a_v1_cgroup_reads_each_controllers_hierarchy_and_the_hierarchical_counters() {
        let root = tempfile::tempdir().expect("tempdir");
        let cgroups = root.path().join("sys/fs/cgroup");
        write(&cgroups.join("cpuacct/misc/cpuacct.usage"), "123456\n");
        write(
            &cgroups.join("cpuacct/misc/cpuacct.stat"),
            "user 12\nsystem 3\n",
        );
        write(&cgroups.join("cpuacct/misc/cgroup.procs"), "10\n11\n");
        write(
            &cgroups.join("cpu/misc/cpu.stat"),
            "nr_periods 40\nnr_throttled 4\nthrottled_time 5000\n",
        );
        write(&cgroups.join("cpu/misc/cpu.shares"), "512\n");
        write(&cgroups.join("cpu/misc/cpu.cfs_period_us"), "100000\n");
        write(&cgroups.join("cpu/misc/cpu.cfs_quota_us"), "-1\n");
        write(&cgroups.join("memory/misc/memory.usage_in_bytes"), "8192\n");
        write(
            &cgroups.join("memory/misc/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        write(
            &cgroups.join("memory/misc/memory.stat"),
            "rss 1\ntotal_rss 4096\ntotal_cache 2048\ntotal_inactive_file 1024\n\
             pgfault 9\npgmajfault 2\ntotal_pgfault 19\ntotal_pgmajfault 3\n",
        );
        write(&cgroups.join("memory/misc/memory.failcnt"), "6\n");
        write(
            &cgroups.join("memory/misc/memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        );
        write(&cgroups.join("pids/misc/pids.current"), "5\n");
        write(&cgroups.join("pids/misc/pids.max"), "max\n");
        write(
            &cgroups.join("blkio/misc/blkio.throttle.io_service_bytes_recursive"),
            "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Total 12288\nTotal 12288\n",
        );
        write(
            &cgroups.join("blkio/misc/blkio.throttle.io_serviced_recursive"),
            "254:0 Read 1\n254:0 Write 2\nTotal 3\n",
        );
        let figures = super::super::cgroup_figures(root.path(), "/misc").expect("figures");
        assert_eq!(figures.cpu_nanos, Some(123_456));
        assert_eq!(
            figures.cpu,
            CpuDetail {
                user_nanos: Some(120_000_000),
                system_nanos: Some(30_000_000),
                periods: Some(40),
                throttled_periods: Some(4),
                throttled_nanos: Some(5000),
            }
        );
        let memory = figures.memory.expect("memory");
        assert_eq!(
            (
                memory.working_set_bytes,
                memory.rss_bytes,
                memory.cache_bytes,
                memory.limit_bytes
            ),
            (7_168, Some(4_096), Some(2_048), None)
        );
        assert_eq!(
            (memory.page_faults, memory.hierarchy_page_faults),
            (Some(9), Some(19))
        );
        assert_eq!(
            (memory.failcnt, memory.oom_kills, memory.swap_bytes),
            (Some(6), Some(1), Some(0))
        );
        assert_eq!(
            figures.tasks,
            Tasks {
                processes: Some(2),
                threads: Some(5),
                threads_max: None,
            }
        );
        assert_eq!(
            (
                figures.limits.cpu_shares,
                figures.limits.cpu_period,
                figures.limits.cpu_quota
            ),
            (Some(512), Some(100_000), None),
            "no quota"
        );
        assert_eq!(figures.limits.memory_limit, None, "unlimited");
        assert_eq!(
            figures.io,
            vec![io::DeviceIo {
                major: 254,
                minor: 0,
                read_bytes: 4096,
                write_bytes: 8192,
                reads: 1,
                writes: 2,
            }]
        );
        assert_eq!(figures.pressure, Pressures::default());
        let error = super::super::cgroup_figures(root.path(), "/gone").expect_err("missing");
        assert!(error.to_string().contains("gone"), "{error}");
    }
}
