//! Tests whose figures need the machine to themselves: each takes [`exclusive`] first, so they
//! run one at a time, and cargo runs this binary on its own, never beside `tests/it`'s many
//! threads. Only what bounds a timing under load it makes itself belongs here (the chaos run,
//! a 1,000-node fleet through an outage); everything else is in `tests/it`, which shares its
//! helpers with this binary (`nodepulse-testkit`, testkit/).

mod chaos;
mod fleet_recovery;

use tokio::sync::{Mutex, MutexGuard};

/// Held for the whole of a test that must not share the machine with another. (tokio's lock:
/// it is held across awaits, and a test that failed holding it leaves it usable.)
async fn exclusive() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::const_new(());
    ALONE.lock().await
}
