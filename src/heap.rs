//! Giving the kernel back the heap the process freed. glibc's malloc returns freed memory only
//! from the top of each arena; what a burst freed below live allocations stays resident for
//! the life of the process. A fleet's start is such a burst (every node registering, patching
//! its status and creating its Lease at once), and so is a node's first sync. `malloc_trim(0)`
//! hands the whole free pages inside every arena back (`madvise`), so resident memory follows
//! what is live instead of the start's peak: 6.6 KiB a node in a 10,000-node fleet.
//! Trims come once a minute, and soon after a burst ([`due`]).

use std::time::Duration;

pub mod due;

/// How often the free heap is handed back at the least. A trim walks every arena's free lists
/// while holding its lock (a few milliseconds for a 10,000-node fleet's heap), so not on every
/// free; once a minute bounds how long memory freed outside a burst stays resident, and a
/// burst is given back sooner ([`due`]).
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

/// Bytes glibc's malloc has handed out and not had back, over every arena (`mallinfo2`'s
/// `uordblks` and its mapped blocks); it walks each arena's free lists under its lock, as a
/// trim does.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn heap_in_use() -> Option<u64> {
    // SAFETY: mallinfo2 takes nothing and returns a plain struct.
    let info = unsafe { libc::mallinfo2() };
    u64::try_from(info.uordblks + info.hblkhd).ok()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap_in_use() -> Option<u64> {
    None
}

/// What a check of [`due`] reads.
fn reading() -> due::Reading {
    due::Reading {
        resident_anon: due::resident_anon(),
        heap_in_use: heap_in_use(),
    }
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
/// the same CPU (docs/benchmarks/real-pods.md).
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

/// Trims on the current thread's runtime until the handle is dropped: every [`TRIM_PERIOD`],
/// and after a burst (`due`, checked every `due::CHECK_PERIOD`). Every
/// `kept_pod::COOL_PERIOD` it first gives up the decoded pods nobody read since the last pass
/// (`kept_pod::cool`).
pub fn start_trimming() -> Trimming {
    Trimming(actix_rt::spawn(async {
        let cool_period = nodepulse_actors::kept_pod::COOL_PERIOD;
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + cool_period, cool_period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The trim's readings on every n-th pass, every `due::CHECK_PERIOD`.
        let check_every = (due::CHECK_PERIOD.as_millis() / cool_period.as_millis()).max(1);
        let mut due = due::Due::new(std::time::Instant::now());
        let mut passes = 0u128;
        loop {
            ticks.tick().await;
            // Pods nobody read since the last pass go back to their packed JSON first, so that
            // what they free is read below and given back with the rest.
            let cooled = nodepulse_actors::kept_pod::cool();
            if cooled.dropped > 0 {
                tracing::trace!(?cooled, "kept pods cooled");
            }
            passes += 1;
            if !passes.is_multiple_of(check_every) {
                continue;
            }
            let Some(reason) = due.check(std::time::Instant::now(), reading()) else {
                continue;
            };
            let started = std::time::Instant::now();
            let released = trim();
            let after = reading();
            due.trimmed(std::time::Instant::now(), after, reason);
            tracing::debug!(
                ?reason,
                released,
                took = ?started.elapsed(),
                resident_anon = after.resident_anon,
                heap_in_use = after.heap_in_use,
                "handed the free heap back"
            );
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

    /// Freed blocks below a live one stay with the allocator until trimmed. A burst that came
    /// and went between two checks shows as resident growth, one that a check saw and that
    /// ended after it as a fall of the heap in use; either makes a trim due at the next
    /// check, and after it the process's resident memory is measurably lower.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_burst_freed_below_live_allocations_is_given_back_at_the_next_check() {
        // The other tests' threads would otherwise allocate into the freed blocks (or trim
        // them) between the free and the measurement.
        if !alone(
            "heap::tests::a_burst_freed_below_live_allocations_is_given_back_at_the_next_check",
        ) {
            return;
        }
        // 64 MiB in 64 KiB blocks (under glibc's 128 KiB mmap threshold, so from the heap),
        // each followed by a small block that stays live: nothing freed is at the top of the
        // heap, and glibc keeps it all.
        fn burst(kept: &mut Vec<Vec<u8>>) -> Vec<Vec<u8>> {
            let mut freed = Vec::new();
            for _ in 0..1024 {
                freed.push(vec![1u8; 64 * 1024]);
                kept.push(vec![1u8; 16]);
            }
            freed
        }
        let resident = || due::resident_anon().expect("/proc/self/status");
        let start = std::time::Instant::now();
        let check = |seconds| start + std::time::Duration::from_secs(seconds);
        let mut due = due::Due::new(start);
        let mut kept = Vec::new();
        let gives_back = |reason| {
            let before = resident();
            assert!(trim(), "{reason:?}: there were free pages to give back");
            let after = resident();
            assert!(
                after + (32 << 20) < before,
                "{reason:?}: resident anonymous memory {before} → {after} bytes"
            );
        };

        assert_eq!(due.check(check(0), reading()), None, "the level before");
        drop(burst(&mut kept));
        assert_eq!(due.check(check(5), reading()), Some(due::Reason::Growth));
        gives_back(due::Reason::Growth);
        due.trimmed(check(5), reading(), due::Reason::Growth);

        let seen = burst(&mut kept);
        // A check in the burst: resident memory grew, and a trim there has nothing to give.
        assert_eq!(due.check(check(10), reading()), Some(due::Reason::Growth));
        due.trimmed(check(10), reading(), due::Reason::Growth);
        drop(seen);
        assert_eq!(due.check(check(15), reading()), Some(due::Reason::Freed));
        gives_back(due::Reason::Freed);
        drop(kept);
    }
}
