//! What another process costs, read from `/proc/<pid>` with the fleet's parsers: resident
//! memory (VmRSS, and its anonymous part RssAnon: the heap and stacks, not the mapped binary),
//! threads, and CPU time (utime + stime).

use std::io;

use nodepulse::fleet::proc_stats::{stat_cpu_seconds, status_value};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub threads: u64,
    pub cpu_seconds: f64,
}

pub fn usage(pid: u32) -> io::Result<Usage> {
    let invalid = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no {what} for pid {pid}"),
        )
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    Ok(Usage {
        rss_bytes: status_value(&status, "VmRSS:")
            .map(|kib| kib * 1024)
            .ok_or_else(|| invalid("VmRSS"))?,
        anon_bytes: status_value(&status, "RssAnon:")
            .map(|kib| kib * 1024)
            .ok_or_else(|| invalid("RssAnon"))?,
        threads: status_value(&status, "Threads:").ok_or_else(|| invalid("Threads"))?,
        cpu_seconds: stat_cpu_seconds(&stat).ok_or_else(|| invalid("CPU times"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_can_be_measured() {
        let usage = usage(std::process::id()).expect("readable");
        assert!(usage.rss_bytes > 0 && usage.anon_bytes > 0 && usage.anon_bytes < usage.rss_bytes);
        assert!(usage.threads >= 1);
    }
}
