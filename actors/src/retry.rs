//! The kubelet's doubling retry waits: `start`, `2 × start`, … pinned at `cap`, no jitter. Used
//! by Node registration (100 ms → 7 s) and the Lease's ensure loop (200 ms → 7 s).

use std::time::Duration;

/// The wait after `failures` consecutive failures.
pub fn doubling_backoff(start: Duration, cap: Duration, failures: u32) -> Duration {
    start.saturating_mul(1u32 << failures.min(16)).min(cap)
}
