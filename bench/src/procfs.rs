//! What another process costs, read from `/proc/<pid>` with the fleet's parsers: resident
//! memory (VmRSS, and its anonymous part RssAnon: the heap and stacks, not the mapped binary),
//! threads, CPU time (utime + stime), and wake-ups (voluntary context switches of every thread:
//! each is a thread that slept and was woken). And the whole machine's CPU time (`/proc/stat`),
//! which counts what no one process does: the runtime's shims, runc and CNI plugins.

use std::io;

use nodepulse::proc_stats::{USER_HZ, stat_cpu_seconds, status_value};

/// CPU seconds every core of the machine spent busy since boot (`/proc/stat`'s `cpu` line:
/// user, nice, system, irq, softirq and steal; not idle or iowait).
pub fn machine_busy_seconds() -> io::Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    busy_seconds(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no cpu line in /proc/stat"))
}

fn busy_seconds(stat: &str) -> Option<f64> {
    let fields: Vec<u64> = stat
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    (fields.len() >= 4).then(|| busy as f64 / USER_HZ)
}

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

/// Voluntary context switches summed over the threads alive now (`/proc/<pid>/task/*/status`).
/// A thread that exited in between takes its count with it, so compare over a steady window.
pub fn wakeups(pid: u32) -> io::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        // A thread may exit between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
            continue;
        };
        total += status_value(&status, "voluntary_ctxt_switches:").unwrap_or(0);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machines_busy_time_sums_all_but_idle_and_iowait() {
        let stat = "cpu  100 5 20 9000 40 3 2 1 0 0\ncpu0 50 2 10 4500 20 1 1 0 0 0\n";
        assert_eq!(busy_seconds(stat), Some(1.31));
        assert_eq!(busy_seconds("intr 1 2 3\n"), None);
        let before = machine_busy_seconds().expect("readable");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Reading /proc/stat in a loop keeps a core busy, so the count must grow.
        while machine_busy_seconds().expect("readable") <= before {
            assert!(
                std::time::Instant::now() < deadline,
                "the machine's busy time never grew"
            );
        }
    }

    #[test]
    fn this_process_can_be_measured() {
        let usage = usage(std::process::id()).expect("readable");
        assert!(usage.rss_bytes > 0 && usage.anon_bytes > 0 && usage.anon_bytes < usage.rss_bytes);
        assert!(usage.threads >= 1);
        // A process that sleeps has woken at least once. Not this one: other test threads
        // exit meanwhile and take their counts with them.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        let mut woke = 0;
        while woke == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            woke = wakeups(sleeper.id()).expect("readable");
        }
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(woke > 0, "a sleeping process's voluntary context switches");
    }
}
