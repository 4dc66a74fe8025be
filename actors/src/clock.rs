//! The actors' one clock. Monotonic time is tokio's (`tokio::time::Instant`, `sleep`), so every
//! timer runs on paused time in tests; wall time (API timestamps, "last failure at" in debug
//! views) is a [`WallClock`] each actor is handed — the system's by default, one that moves with
//! tokio's paused clock in tests. `jiff::Timestamp::now` is read here and nowhere else in the
//! actors (clippy.toml bans it).

use std::{sync::Arc, time::Duration};

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// Where wall time comes from.
pub type WallClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The system's wall clock.
#[allow(clippy::disallowed_methods)] // The one read of the system's wall clock.
pub fn system() -> WallClock {
    Arc::new(Timestamp::now)
}

/// A wall clock that starts at the system's time now and moves with tokio's clock (on paused
/// time in tests: advanced by `tokio::time::advance`, not by the machine's time).
pub fn following_tokio() -> WallClock {
    let (wall, origin) = (system()(), Instant::now());
    Arc::new(move || {
        let elapsed = SignedDuration::try_from(origin.elapsed()).unwrap_or(SignedDuration::MAX);
        wall.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    })
}

/// How long from `now` until `due` (zero when it is past), for a tokio timer.
pub fn wait_until(now: Timestamp, due: Timestamp) -> Duration {
    now.duration_until(due).try_into().unwrap_or(Duration::ZERO)
}
