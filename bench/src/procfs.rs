//! What a process costs, read from `/proc/<pid>`: resident memory (VmRSS) and CPU time
//! (utime + stime). Clock ticks are taken as 100 per second, Linux's USER_HZ on every
//! architecture nodepulse is built for.

use std::io;

const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
}

/// VmRSS in bytes from a `/proc/<pid>/status` text.
pub fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// utime + stime in seconds from a `/proc/<pid>/stat` text. The command name (field 2) may
/// hold spaces, so fields are counted after its closing parenthesis.
pub fn cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the whole line are the 12th and 13th after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
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
        rss_bytes: rss_bytes(&status).ok_or_else(|| invalid("VmRSS"))?,
        cpu_seconds: cpu_seconds(&stat).ok_or_else(|| invalid("CPU times"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_and_cpu_even_with_spaces_in_the_name() {
        assert_eq!(rss_bytes("Name:\tx\nVmRSS:\t  2048 kB\n"), Some(2 << 20));
        let stat = "42 (node pulse) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 1 1";
        assert_eq!(cpu_seconds(stat), Some(3.0));
    }

    #[test]
    fn this_process_can_be_measured() {
        let usage = usage(std::process::id()).expect("readable");
        assert!(usage.rss_bytes > 0);
    }
}
