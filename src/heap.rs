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

/// The block size from which glibc serves an allocation from a mapping of its own (when the
/// heap's top has no room for it), returned to the kernel when freed. glibc's default starts
/// at 128 KiB and, each time a mapped block is freed, rises to that block's size (up to 32
/// MiB), keeping twice as much free at the heap's top: after one large answer (a pod list, a
/// relist, a log read) a burst's blocks come from the heap and stay with it, resident until
/// the minute's trim and fragmenting it. A fixed threshold keeps both at their starting
/// values. Interleaved on the conformance kit with 100 pods: 0.6 MiB less resident memory,
/// the same CPU (README, "Real pods, side by side").
pub const MMAP_THRESHOLD: usize = 32 * 1024;

/// Serves blocks of [`MMAP_THRESHOLD`] and more from mappings of their own; whether glibc took
/// the setting. For a single node, as [`use_one_arena`]: a fleet allocates such blocks all
/// the time, and a mapping each would cost it system calls.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn map_large_blocks() -> bool {
    let threshold = libc::c_int::try_from(MMAP_THRESHOLD).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt takes two integers and has no precondition; a fixed threshold also
    // stops glibc raising it as large blocks are freed.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn map_large_blocks() -> bool {
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

    /// After a large block was freed, glibc's default keeps as much free at the heap's top as
    /// twice that block; with the fixed threshold a burst's blocks are mapped, or trimmed from
    /// the top, when freed.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_bursts_blocks_go_back_when_freed() {
        // The other tests' threads allocate and free blocks of their own.
        if !alone("heap::tests::a_bursts_blocks_go_back_when_freed") {
            return;
        }
        #[allow(unsafe_code)]
        fn free_in_arena() -> usize {
            // SAFETY: mallinfo2 takes nothing and returns a plain struct.
            unsafe { libc::mallinfo2().fordblks }
        }
        assert!(map_large_blocks());
        // By default freeing a mapped 4 MiB block raises glibc's thresholds to it.
        drop(std::hint::black_box(vec![1u8; 4 << 20]));
        let burst: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 2 * MMAP_THRESHOLD]).collect();
        drop(std::hint::black_box(burst));
        let free = free_in_arena();
        assert!(
            free < 512 << 10,
            "{free} bytes free in the arena after a 4 MiB burst"
        );
    }

    /// Whether this is the process where the test `name` runs alone; if not, runs it so (this
    /// test binary again, that test only) and asserts that it passed there.
    fn alone(name: &str) -> bool {
        const ALONE: &str = "NODEPULSE_HEAP_TEST_ALONE";
        if std::env::var_os(ALONE).is_some() {
            return true;
        }
        let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(ALONE, "1")
            .output()
            .expect("the test runs alone");
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "alone: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        false
    }

    /// Freed blocks below a live one stay with the allocator until trimmed: after a trim the
    /// process's resident memory is measurably lower.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_gives_back_pages_freed_below_live_allocations() {
        // The other tests' threads would otherwise allocate into the freed blocks (or trim
        // them) between the free and the measurement.
        if !alone("heap::tests::a_trim_gives_back_pages_freed_below_live_allocations") {
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
