//! The files a `ResourceConfig` becomes, as libcontainer writes them for the kubelet: on v1
//! `cpu.shares`, `cpu.cfs_period_us`/`cfs_quota_us`, `memory.limit_in_bytes`, `pids.max`,
//! `hugetlb.<size>.limit_in_bytes`; on v2 `cpu.weight` (the kubelet's linear conversion of
//! shares), `cpu.max`, `memory.max`, `pids.max`, `hugetlb.<size>.max`. Zero means "leave it",
//! as libcontainer's. Pure: the caller writes them.

use nodepulse_actors::ports::ResourceConfig;

/// One file of one controller and what goes in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub controller: &'static str,
    pub file: String,
    pub value: String,
}

fn setting(controller: &'static str, file: impl Into<String>, value: impl ToString) -> Setting {
    Setting {
        controller,
        file: file.into(),
        value: value.to_string(),
    }
}

/// The kubelet's `getCPUWeight`: shares [2, 262144] onto weight [1, 10000], linearly.
pub fn cpu_weight(shares: u64) -> u64 {
    if shares >= 262_144 {
        return 10_000;
    }
    1 + (shares.saturating_sub(2)) * 9_999 / 262_142
}

/// A pids limit as libcontainer writes it: a positive number, or `max`.
fn pids(limit: i64) -> String {
    if limit > 0 {
        limit.to_string()
    } else {
        "max".to_owned()
    }
}

/// The kernel's name of a huge page size (`2MB`, `1GB`), as runc's `HugePageSizes` lists them.
pub fn hugepage_size_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut size = bytes;
    let mut unit = 0;
    while size >= 1024 && size.is_multiple_of(1024) && unit < UNITS.len() - 1 {
        size /= 1024;
        unit += 1;
    }
    format!("{size}{}", UNITS[unit])
}

/// The v1 files, in libcontainer's order (the CFS period before the quota).
pub fn v1_settings(config: &ResourceConfig) -> Vec<Setting> {
    let mut out = Vec::new();
    if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
        out.push(setting("cpu", "cpu.shares", shares));
    }
    if let Some(period) = config.cpu_period.filter(|p| *p != 0) {
        out.push(setting("cpu", "cpu.cfs_period_us", period));
    }
    if let Some(quota) = config.cpu_quota.filter(|q| *q != 0) {
        out.push(setting("cpu", "cpu.cfs_quota_us", quota));
    }
    if let Some(memory) = config.memory.filter(|m| *m != 0) {
        out.push(setting("memory", "memory.limit_in_bytes", memory));
    }
    if let Some(limit) = config.pids_limit.filter(|p| *p != 0) {
        out.push(setting("pids", "pids.max", pids(limit)));
    }
    for (size, limit) in &config.hugepage_limits {
        let name = hugepage_size_name(*size);
        out.push(setting(
            "hugetlb",
            format!("hugetlb.{name}.limit_in_bytes"),
            limit,
        ));
    }
    out
}

/// The v2 files.
pub fn v2_settings(config: &ResourceConfig) -> Vec<Setting> {
    let mut out = Vec::new();
    if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
        out.push(setting("cpu", "cpu.weight", cpu_weight(shares)));
    }
    let quota = config.cpu_quota.unwrap_or(0);
    let period = config.cpu_period.unwrap_or(0);
    if quota != 0 || period != 0 {
        let mut max = if quota > 0 {
            quota.to_string()
        } else {
            "max".to_owned()
        };
        if period != 0 {
            max = format!("{max} {period}");
        }
        out.push(setting("cpu", "cpu.max", max));
    }
    if let Some(memory) = config.memory.filter(|m| *m != 0) {
        let value = if memory < 0 {
            "max".to_owned()
        } else {
            memory.to_string()
        };
        out.push(setting("memory", "memory.max", value));
    }
    if let Some(limit) = config.pids_limit.filter(|p| *p != 0) {
        out.push(setting("pids", "pids.max", pids(limit)));
    }
    for (size, limit) in &config.hugepage_limits {
        let name = hugepage_size_name(*size);
        out.push(setting("hugetlb", format!("hugetlb.{name}.max"), limit));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guaranteed() -> ResourceConfig {
        ResourceConfig {
            cpu_shares: Some(1024),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory: Some(64 << 20),
            pids_limit: Some(100),
            hugepage_limits: [(2 << 20, 4 << 20)].into_iter().collect(),
        }
    }

    fn files(settings: &[Setting]) -> Vec<(&str, &str)> {
        settings
            .iter()
            .map(|s| (s.file.as_str(), s.value.as_str()))
            .collect()
    }

    #[test]
    fn v1_writes_shares_period_before_quota_memory_pids_and_hugetlb() {
        assert_eq!(
            files(&v1_settings(&guaranteed())),
            [
                ("cpu.shares", "1024"),
                ("cpu.cfs_period_us", "100000"),
                ("cpu.cfs_quota_us", "50000"),
                ("memory.limit_in_bytes", "67108864"),
                ("pids.max", "100"),
                ("hugetlb.2MB.limit_in_bytes", "4194304"),
            ]
        );
        let unlimited = ResourceConfig {
            cpu_quota: Some(-1),
            memory: Some(-1),
            pids_limit: Some(-1),
            ..ResourceConfig::default()
        };
        assert_eq!(
            files(&v1_settings(&unlimited)),
            [
                ("cpu.cfs_quota_us", "-1"),
                ("memory.limit_in_bytes", "-1"),
                ("pids.max", "max")
            ]
        );
        assert!(v1_settings(&ResourceConfig::default()).is_empty());
    }

    #[test]
    fn v2_writes_the_kubelets_weight_cpu_max_and_memory_max() {
        assert_eq!(
            files(&v2_settings(&guaranteed())),
            [
                ("cpu.weight", "39"),
                ("cpu.max", "50000 100000"),
                ("memory.max", "67108864"),
                ("pids.max", "100"),
                ("hugetlb.2MB.max", "4194304"),
            ]
        );
        let no_quota = ResourceConfig {
            cpu_shares: Some(2),
            cpu_quota: Some(-1),
            cpu_period: Some(100_000),
            memory: Some(-1),
            ..ResourceConfig::default()
        };
        assert_eq!(
            files(&v2_settings(&no_quota)),
            [
                ("cpu.weight", "1"),
                ("cpu.max", "max 100000"),
                ("memory.max", "max")
            ]
        );
    }

    #[test]
    fn weights_and_page_sizes_convert_as_the_kubelet_and_runc() {
        assert_eq!(cpu_weight(2), 1);
        assert_eq!(cpu_weight(1024), 39);
        assert_eq!(cpu_weight(262_144), 10_000);
        assert_eq!(cpu_weight(1_000_000), 10_000);
        assert_eq!(hugepage_size_name(2 << 20), "2MB");
        assert_eq!(hugepage_size_name(1 << 30), "1GB");
        assert_eq!(hugepage_size_name(64 << 10), "64KB");
    }
}
