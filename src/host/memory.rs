//! Node memory as the kubelet's summary stats give it: the root cgroup's working set (usage −
//! inactive file pages, floored at zero) against the machine's memory. cgroup v2's root has no
//! `memory.current`, so usage is emulated from `/proc/meminfo` as runc does; with no cgroup
//! data at all, `/proc/meminfo` alone gives the same figures.

use std::path::Path;

use nodepulse_actors::ports::{HostError, MemorySource, MemoryStats};

use super::read;

/// Above this a cgroup v1 limit means "unlimited" (the kernel writes 2^63 − page size).
const UNLIMITED: u64 = 1 << 62;

/// `MemTotal`, `MemFree` and `Inactive(file)` of `/proc/meminfo`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meminfo {
    pub total: u64,
    pub free: u64,
    pub inactive_file: Option<u64>,
}

/// Parses `/proc/meminfo`; `MemTotal` and `MemFree` are required.
pub fn parse_meminfo(path: &Path, text: &str) -> Result<Meminfo, HostError> {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|line| {
            let (key, rest) = line.split_once(':')?;
            if key.trim() != name {
                return None;
            }
            let mut parts = rest.split_whitespace();
            let value: u64 = parts.next()?.parse().ok()?;
            match parts.next() {
                Some("kB") => value.checked_mul(1024),
                None => Some(value),
                Some(_) => None,
            }
        })
    };
    let missing = |name: &str| HostError::Parse {
        path: path.to_owned(),
        message: format!("no readable {name} line"),
    };
    Ok(Meminfo {
        total: field("MemTotal").ok_or_else(|| missing("MemTotal"))?,
        free: field("MemFree").ok_or_else(|| missing("MemFree"))?,
        inactive_file: field("Inactive(file)"),
    })
}

/// A `key value` line of a cgroup `memory.stat`.
pub fn stat_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The root cgroup's memory under `root` (`/` on a real host).
pub fn node_memory(root: &Path) -> Result<MemoryStats, HostError> {
    node_memory_figures(root).map(|figures| MemoryStats {
        capacity_bytes: figures.capacity_bytes,
        working_set_bytes: figures.working_set_bytes,
        source: figures.source,
    })
}

/// The node's memory as the kubelet's summary reports it (`node.memory`): what
/// [`node_memory`] reads, with the usage it is derived from, and the root cgroup's RSS and page
/// faults where the cgroup has them (`None` from `/proc/meminfo` alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFigures {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub working_set_bytes: u64,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    pub source: MemorySource,
}

pub fn node_memory_figures(root: &Path) -> Result<MemoryFigures, HostError> {
    let meminfo_path = root.join("proc/meminfo");
    let meminfo = parse_meminfo(&meminfo_path, &read(&meminfo_path)?)?;
    let cgroup = root.join("sys/fs/cgroup");
    let v1 = cgroup.join("memory/memory.usage_in_bytes");
    // The counters' names in memory.stat: v1's root counts its children under `total_`.
    let (usage, stat, names, source) = if cgroup.join("cgroup.controllers").exists() {
        // The root has memory.stat but no memory.current; a cgroup namespace's root has both.
        let current = cgroup.join("memory.current");
        let usage = if current.exists() {
            parse_number(&current, &read(&current)?)?
        } else {
            meminfo.total.saturating_sub(meminfo.free)
        };
        let stat = std::fs::read_to_string(cgroup.join("memory.stat")).ok();
        let names = ["inactive_file", "anon", "pgfault", "pgmajfault"];
        (usage, stat, names, MemorySource::CgroupV2)
    } else if v1.exists() {
        let usage = parse_number(&v1, &read(&v1)?)?;
        let stat = std::fs::read_to_string(cgroup.join("memory/memory.stat")).ok();
        let names = [
            "total_inactive_file",
            "total_rss",
            "total_pgfault",
            "total_pgmajfault",
        ];
        (usage, stat, names, MemorySource::CgroupV1)
    } else {
        let usage = meminfo.total.saturating_sub(meminfo.free);
        (usage, None, [""; 4], MemorySource::Meminfo)
    };
    let field = |name: &str| stat.as_deref().and_then(|stat| stat_field(stat, name));
    let inactive_file = match source {
        MemorySource::CgroupV1 => field(names[0]),
        _ => field(names[0]).or(meminfo.inactive_file),
    };
    Ok(MemoryFigures {
        capacity_bytes: meminfo.total,
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(inactive_file.unwrap_or(0)),
        rss_bytes: field(names[1]),
        page_faults: field(names[2]),
        major_page_faults: field(names[3]),
        source,
    })
}

/// The pods cgroup (`pods_cgroup`, or the kubelet's usual `kubepods`), when it exists with a
/// finite limit: the figures behind `allocatableMemory.available`.
pub fn pods_memory(root: &Path, pods_cgroup: Option<&str>) -> Option<MemoryStats> {
    let cgroup = root.join("sys/fs/cgroup");
    let configured = pods_cgroup.map(|name| {
        let name = name.trim_start_matches('/');
        [
            (
                name.to_owned(),
                "memory.max",
                "memory.current",
                "inactive_file",
                MemorySource::CgroupV2,
            ),
            (
                format!("memory/{name}"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
                MemorySource::CgroupV1,
            ),
        ]
    });
    let usual = [
        (
            "kubepods.slice".to_owned(),
            "memory.max",
            "memory.current",
            "inactive_file",
            MemorySource::CgroupV2,
        ),
        (
            "kubepods".to_owned(),
            "memory.max",
            "memory.current",
            "inactive_file",
            MemorySource::CgroupV2,
        ),
        (
            "memory/kubepods".to_owned(),
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "total_inactive_file",
            MemorySource::CgroupV1,
        ),
    ];
    let candidates: Vec<_> = match configured {
        Some(configured) => configured.into_iter().collect(),
        None => usual.into_iter().collect(),
    };
    for (dir, limit, usage, inactive, source) in candidates {
        let dir = cgroup.join(dir);
        let Ok(limit) = std::fs::read_to_string(dir.join(limit)) else {
            continue;
        };
        let limit: u64 = limit
            .trim()
            .parse()
            .ok()
            .filter(|limit| *limit < UNLIMITED)?;
        let usage: u64 = std::fs::read_to_string(dir.join(usage))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let inactive = std::fs::read_to_string(dir.join("memory.stat"))
            .ok()
            .and_then(|stat| stat_field(&stat, inactive))
            .unwrap_or(0);
        return Some(MemoryStats {
            capacity_bytes: limit,
            working_set_bytes: usage.saturating_sub(inactive),
            source,
        });
    }
    None
}

fn parse_number(path: &Path, text: &str) -> Result<u64, HostError> {
    text.trim().parse().map_err(|_| HostError::Parse {
        path: path.to_owned(),
        message: format!("expected a number, found {:?}", text.trim()),
    })
}
