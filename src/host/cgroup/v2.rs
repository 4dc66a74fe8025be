//! A cgroup on cgroup v2, as cAdvisor's v2 reader (runc's `fs2` manager) reads it: one
//! directory for every controller; CPU from `cpu.stat` (microseconds), memory from
//! `memory.current`, `memory.stat` and `memory.events`, block I/O from `io.stat`, the limits
//! from `cpu.weight` (as shares), `cpu.max` and `memory.{max,swap.max,min}`, and pressure.

use std::path::Path;

use nodepulse_actors::ports::HostError;

use super::{
    CgroupFigures, CgroupMemory, CpuDetail, Limits, Tasks, count_lines, created, exists, io,
    limited, number, pairs, root_memory,
};
use crate::host::{
    memory::node_memory_figures,
    pressure::{Layout, pressures},
};

/// cAdvisor's `convertCPUWeightToCPULimit`: `cpu.weight` (1–10000) as v1 shares.
fn shares(weight: u64) -> Option<u64> {
    (1..=10_000)
        .contains(&weight)
        .then(|| 2 + (weight - 1) * 262_142 / 9_999)
}

/// `cpu.max`: `$QUOTA $PERIOD`, the quota `max` when there is none.
fn cpu_max(text: &str) -> (Option<u64>, Option<u64>) {
    let mut fields = text.split_whitespace();
    let quota = fields.next().and_then(|quota| quota.parse().ok());
    let period = fields.next().and_then(|period| period.parse().ok());
    (quota, period)
}

pub fn figures(root: &Path, dir: &Path, is_root: bool) -> Result<CgroupFigures, HostError> {
    exists(dir)?;
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default();
    let stat = pairs(&stat);
    let micros = |name| stat(name).map(|usec: u64| usec.saturating_mul(1_000));
    let cpu = CpuDetail {
        user_nanos: micros("user_usec"),
        system_nanos: micros("system_usec"),
        periods: stat("nr_periods"),
        throttled_periods: stat("nr_throttled"),
        throttled_nanos: micros("throttled_usec"),
    };
    let memory = if is_root {
        // The root has no memory.current: the node's figures are its.
        node_memory_figures(root).ok().map(root_memory)
    } else {
        memory(dir)
    };
    let (cpu_quota, cpu_period) = std::fs::read_to_string(dir.join("cpu.max"))
        .map(|text| cpu_max(&text))
        .unwrap_or_default();
    let limits = Limits {
        cpu_shares: number(&dir.join("cpu.weight")).and_then(shares),
        cpu_period,
        cpu_quota,
        // `max` does not parse: no limit.
        memory_limit: limited(number(&dir.join("memory.max"))),
        swap_limit: limited(number(&dir.join("memory.swap.max"))),
        memory_reservation: limited(number(&dir.join("memory.min"))).filter(|min| *min > 0),
    };
    let tasks = Tasks {
        processes: count_lines(&dir.join("cgroup.procs")),
        threads: number(&dir.join("pids.current")),
        threads_max: number(&dir.join("pids.max")),
    };
    Ok(CgroupFigures {
        created: created(&[dir.to_owned()], "cgroup.events"),
        cpu_nanos: micros("usage_usec"),
        cpu,
        memory,
        io: io::from_io_stat(&std::fs::read_to_string(dir.join("io.stat")).unwrap_or_default()),
        tasks,
        limits,
        pressure: pressures(Layout::Cgroup(dir)),
    })
}

/// `memory.current`, less `inactive_file` for the working set; `anon` as RSS, `file` as the
/// cache; the failures and OOM kills from `memory.events`.
fn memory(dir: &Path) -> Option<CgroupMemory> {
    let usage = number(&dir.join("memory.current"))?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let field = pairs(&stat);
    let events = std::fs::read_to_string(dir.join("memory.events")).unwrap_or_default();
    let event = pairs(&events);
    let inactive_file = field("inactive_file");
    Some(CgroupMemory {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(inactive_file.unwrap_or(0)),
        limit_bytes: limited(number(&dir.join("memory.max"))),
        rss_bytes: field("anon"),
        page_faults: field("pgfault"),
        major_page_faults: field("pgmajfault"),
        // v2 counts one scope: the cgroup with its children.
        hierarchy_page_faults: field("pgfault"),
        hierarchy_major_page_faults: field("pgmajfault"),
        cache_bytes: field("file"),
        mapped_file_bytes: field("file_mapped"),
        swap_bytes: number(&dir.join("memory.swap.current")),
        kernel_bytes: field("kernel"),
        active_file_bytes: field("active_file"),
        inactive_file_bytes: inactive_file,
        max_usage_bytes: number(&dir.join("memory.peak")),
        failcnt: event("max"),
        oom_kills: event("oom_kill"),
    })
}

#[cfg(test)]
mod tests {
    use super::{super::tests::write, *};

    #[test]
    fn a_v2_cgroup_gives_cpu_memory_io_limits_and_pressure_and_an_unknown_one_is_an_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let cgroups = root.path().join("sys/fs/cgroup");
        write(&cgroups.join("cgroup.controllers"), "cpu memory io\n");
        let unit = cgroups.join("runtime.slice");
        write(
            &unit.join("cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n\
             nr_periods 8\nnr_throttled 2\nthrottled_usec 30\n",
        );
        write(&unit.join("cpu.weight"), "100\n");
        write(&unit.join("cpu.max"), "50000 100000\n");
        write(&unit.join("memory.current"), "10000\n");
        write(&unit.join("memory.max"), "max\n");
        write(
            &unit.join("memory.stat"),
            "anon 6000\nfile 4000\nfile_mapped 100\ninactive_file 3000\npgfault 7\npgmajfault 1\n",
        );
        write(
            &unit.join("memory.events"),
            "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
        );
        write(
            &unit.join("io.stat"),
            "8:0 rbytes=512 wbytes=1024 rios=1 wios=2 dbytes=0 dios=0\n",
        );
        write(&unit.join("cgroup.procs"), "1\n");
        write(&unit.join("pids.current"), "3\n");
        write(&unit.join("pids.max"), "max\n");
        write(&unit.join("io.pressure"), "some total=4\nfull total=2\n");
        let figures = super::super::cgroup_figures(root.path(), "/runtime.slice").expect("read");
        assert_eq!(figures.cpu_nanos, Some(1_500_000));
        assert_eq!(
            figures.cpu,
            CpuDetail {
                user_nanos: Some(1_000_000),
                system_nanos: Some(500_000),
                periods: Some(8),
                throttled_periods: Some(2),
                throttled_nanos: Some(30_000),
            }
        );
        let memory = figures.memory.expect("memory");
        assert_eq!(
            (
                memory.usage_bytes,
                memory.working_set_bytes,
                memory.limit_bytes,
                memory.rss_bytes,
                memory.cache_bytes
            ),
            (10_000, 7_000, None, Some(6_000), Some(4_000))
        );
        assert_eq!((memory.failcnt, memory.oom_kills), (Some(4), Some(1)));
        assert_eq!(
            (
                figures.limits.cpu_shares,
                figures.limits.cpu_quota,
                figures.limits.cpu_period
            ),
            (Some(2_597), Some(50_000), Some(100_000)),
            "weight 100 is 2 + 99 × 262142 / 9999 shares, as cAdvisor converts it"
        );
        assert_eq!((figures.io[0].read_bytes, figures.io[0].writes), (512, 2));
        assert_eq!(
            (
                figures.tasks.processes,
                figures.tasks.threads,
                figures.tasks.threads_max
            ),
            (Some(1), Some(3), None)
        );
        assert_eq!(figures.pressure.io.map(|p| p.full.total_micros), Some(2));
        assert_eq!(figures.pressure.cpu, None);
        assert!(figures.created.is_some());
        let error = super::super::cgroup_figures(root.path(), "/gone.slice").expect_err("missing");
        assert!(error.to_string().contains("gone.slice"), "{error}");
    }
}
