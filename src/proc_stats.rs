//! What this process costs, from `/proc/self`: resident memory (`VmRSS`, and its anonymous part
//! `RssAnon`), threads, and CPU time (user + system).

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, 100 on every Linux
/// architecture nodepulse builds for.
pub const USER_HZ: f64 = 100.0;

/// Resident memory in bytes, `None` where `/proc` is unavailable.
pub fn resident_bytes() -> Option<u64> {
    status_field("VmRSS:").map(|kib| kib * 1024)
}

/// Threads of this process.
pub fn threads() -> Option<u64> {
    status_field("Threads:")
}

/// The number after `name` in this process's `/proc/self/status`.
pub fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_value(&status, name)
}

/// The number after `name` in a `/proc/<pid>/status` text (kB for memory fields).
pub fn status_value(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// CPU seconds (user + system) this process has used.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat_cpu_seconds(&stat)
}

/// utime + stime in seconds from a `/proc/<pid>/stat` text.
pub fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start at field 3, so utime (14) and stime (15) are the 12th and 13th after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some((user + system) as f64 / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_and_cpu_from_the_proc_formats() {
        let status = "Name:\tnodepulse\nVmRSS:\t  123456 kB\nRssAnon:\t  2048 kB\nThreads:\t7\n";
        assert_eq!(status_value(status, "VmRSS:"), Some(123_456));
        assert_eq!(status_value(status, "RssAnon:"), Some(2048));
        assert_eq!(status_value("VmRSS:\t  9000 kB\n", "RssAnon:"), None);
        assert_eq!(status_value(status, "Threads:"), Some(7));
        let stat = "42 (node pulse) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0";
        assert_eq!(stat_cpu_seconds(stat), Some(3.0));
        assert!(resident_bytes().is_some_and(|bytes| bytes > 0));
        assert!(cpu_seconds().is_some());
    }
}
