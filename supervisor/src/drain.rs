//! Work the owner of a supervisor wants finished before its children stop for good: at
//! shutdown, while every actor still runs, the drains get the first half of the deadline (a
//! StatusManager sending the pod statuses the API lacks, say). A drain that overruns is
//! abandoned and the stop goes ahead with the rest of the deadline.

use std::time::Duration;

use futures::future::BoxFuture;

/// Starts one drain; called once per shutdown.
pub type Drain = Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// The part of a shutdown's deadline the drains may take.
pub(crate) fn share(deadline: Duration) -> Duration {
    deadline / 2
}

/// Runs every drain at once; whether all finished within `within`.
pub(crate) async fn run(drains: &[Drain], within: Duration) -> bool {
    if drains.is_empty() {
        return true;
    }
    let all = futures::future::join_all(drains.iter().map(|drain| drain()));
    tokio::time::timeout(within, all).await.is_ok()
}
