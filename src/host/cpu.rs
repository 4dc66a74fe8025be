//! Node CPU time as the kubelet's summary gives it (`node.cpu.usageCoreNanoSeconds`): the root
//! cgroup's `cpu.stat` `usage_usec` on cgroup v2 where the kernel has it, else the busy ticks of
//! `/proc/stat`'s `cpu` line (everything but idle and iowait), as cAdvisor's root figure counts;
//! and the boot time (`/proc/stat`'s `btime`), the summary's node `startTime`.

use std::path::Path;

use nodepulse_actors::ports::HostError;

use super::{memory::stat_field, read};

/// `/proc/stat` counts in USER_HZ, which Linux fixes at 100 on every architecture it exports.
const NANOS_PER_TICK: u64 = 10_000_000;

/// Cumulative CPU time of the whole node over all cores, in nanoseconds.
pub fn node_cpu_nanos(root: &Path) -> Result<u64, HostError> {
    let cgroup_stat = root.join("sys/fs/cgroup/cpu.stat");
    if let Some(usage_usec) = std::fs::read_to_string(&cgroup_stat)
        .ok()
        .and_then(|text| stat_field(&text, "usage_usec"))
    {
        return Ok(usage_usec.saturating_mul(1_000));
    }
    let proc_stat = root.join("proc/stat");
    parse_proc_stat(&proc_stat, &read(&proc_stat)?)
}

/// The busy nanoseconds of `/proc/stat`'s aggregate `cpu` line: user, nice, system, irq,
/// softirq and steal (guest time is already inside user and nice).
pub fn parse_proc_stat(path: &Path, text: &str) -> Result<u64, HostError> {
    let fields: Option<Vec<u64>> = text
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))
        .map(|rest| rest.split_whitespace().map(str::parse).collect())
        .and_then(Result::ok);
    let busy = fields.filter(|fields| fields.len() >= 4).map(|fields| {
        // user nice system idle iowait irq softirq steal …
        [0, 1, 2, 5, 6, 7]
            .iter()
            .filter_map(|index| fields.get(*index))
            .sum::<u64>()
    });
    busy.map(|ticks| ticks.saturating_mul(NANOS_PER_TICK))
        .ok_or_else(|| HostError::Parse {
            path: path.to_owned(),
            message: "no readable aggregate `cpu` line".to_owned(),
        })
}

/// When the node booted, in seconds since the epoch.
pub fn boot_time(root: &Path) -> Result<i64, HostError> {
    let path = root.join("proc/stat");
    let text = read(&path)?;
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|seconds| seconds.trim().parse().ok())
        .ok_or_else(|| HostError::Parse {
            path,
            message: "no readable `btime` line".to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_ticks_of_the_aggregate_line_become_nanoseconds() {
        let text = "cpu  100 20 30 4000 50 6 7 8 90 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n";
        let nanos = parse_proc_stat(Path::new("/proc/stat"), text).expect("parses");
        assert_eq!(nanos, (100 + 20 + 30 + 6 + 7 + 8) * NANOS_PER_TICK);
    }

    #[test]
    fn a_stat_without_the_cpu_line_is_an_error_naming_the_file() {
        let error = parse_proc_stat(Path::new("/proc/stat"), "intr 1 2\n").expect_err("no cpu");
        assert!(error.to_string().contains("/proc/stat"), "{error}");
    }

    #[test]
    fn cgroup_v2_usage_is_preferred_over_proc_stat() {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(root.path().join("sys/fs/cgroup")).expect("dirs");
        std::fs::write(
            root.path().join("sys/fs/cgroup/cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\n",
        )
        .expect("write");
        assert_eq!(node_cpu_nanos(root.path()).expect("reads"), 1_500_000);
    }
}
