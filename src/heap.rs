//! Giving the kernel back the heap the process freed. glibc's malloc returns freed memory only
//! from the top of each arena; what a burst freed below live allocations stays resident for
//! the life of the process. A fleet's start is such a burst (every node registering, patching
//! its status and creating its Lease at once), and so is a node's first sync. `malloc_trim(0)`
//! hands the whole free pages inside every arena back (`madvise`), so resident memory follows
//! what is live instead of the start's peak: 6.6 KiB a node in a 10,000-node fleet.

use std::time::Duration;

/// How often the free heap is handed back. A trim walks every arena's free lists while
/// holding its lock (a few milliseconds for a 10,000-node fleet's heap), so not on every
/// free; once a minute is one wake-up an idle node hardly notices and bounds how long a burst
/// stays resident.
pub const TRIM_PERIOD: Duration = Duration::from_secs(60);

/// Hands the free pages of every malloc arena back to the kernel; whether any were.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim() -> bool {
    // SAFETY: malloc_trim takes no pointer and has no precondition; glibc takes each arena's
    // lock while it walks it, as malloc and free do.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Other allocators (musl's, say) give freed pages back themselves, or have no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

/// Makes every thread allocate from one malloc arena instead of glibc's one per thread (up to
/// eight a core); whether glibc took the setting. A single node's threads are idle nearly all
/// the time, so they do not contend for it, and each extra arena kept 16–90 KiB resident. Call
/// it before any other thread starts. Not for a fleet: its shared threads allocate all the
/// time.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn use_one_arena() -> bool {
    // SAFETY: mallopt takes two integers and has no precondition; glibc applies it to arenas
    // created from then on.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn use_one_arena() -> bool {
    false
}

/// Trims every [`TRIM_PERIOD`] on the current thread's runtime until the handle is dropped.
pub fn start_trimming() -> Trimming {
    Trimming(actix_rt::spawn(async {
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + TRIM_PERIOD, TRIM_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let released = trim();
            tracing::debug!(released, "handed the free heap back");
        }
    }))
}

/// The periodic trim; it stops when this is dropped.
pub struct Trimming(actix_rt::task::JoinHandle<()>);

impl Drop for Trimming {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_one_arena_setting() {
        assert!(use_one_arena());
    }

    /// Freed blocks below a live one stay with the allocator until trimmed: after a trim the
    /// process's resident memory is measurably lower.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_gives_back_pages_freed_below_live_allocations() {
        // Alone in a process of its own: the other tests' threads would otherwise allocate into
        // the freed blocks (or trim them) between the free and the measurement.
        const ALONE: &str = "NODEPULSE_HEAP_TRIM_TEST";
        if std::env::var_os(ALONE).is_none() {
            let name = "heap::tests::a_trim_gives_back_pages_freed_below_live_allocations";
            let output =
                std::process::Command::new(std::env::current_exe().expect("the test binary"))
                    .args(["--exact", name, "--test-threads=1", "--nocapture"])
                    .env(ALONE, "1")
                    .output()
                    .expect("the test runs alone");
            assert!(
                output.status.success()
                    && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
                "alone: {}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return;
        }
        fn resident_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            status
                .lines()
                .find_map(|line| line.strip_prefix("RssAnon:"))
                .and_then(|value| value.trim().trim_end_matches(" kB").parse().ok())
                .expect("RssAnon")
        }
        // 64 MiB in 64 KiB blocks (under glibc's 128 KiB mmap threshold, so from the heap),
        // each followed by a small block that stays live: nothing freed is at the top of the
        // heap, and glibc keeps it all.
        let mut freed = Vec::new();
        let mut kept = Vec::new();
        for _ in 0..1024 {
            freed.push(vec![1u8; 64 * 1024]);
            kept.push(vec![1u8; 16]);
        }
        drop(freed);
        let before = resident_kib();
        assert!(trim(), "there were free pages to give back");
        let after = resident_kib();
        assert!(
            after + 32 * 1024 < before,
            "resident anonymous memory {before} KiB → {after} KiB"
        );
        drop(kept);
    }
}
