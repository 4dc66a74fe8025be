//! Issue 29's storm check, shared by the simulated and the CRI pod tests: a settled pod costs
//! no request. The count is nodepulse's own (StatusManager's syncs and reconciles from its
//! debug state), so it holds on a real cluster too; on the emulator its request log is a
//! second witness.

use std::time::{Duration, Instant};

use nodepulse_supervisor::SupervisorHandle;

use crate::{cluster::TestCluster, eventually_async};

/// StatusManager's syncs started (PATCHed or found nothing to send), its reconciles, and its
/// batch passes.
async fn status_syncs(supervisor: &SupervisorHandle) -> (u64, u64, u64) {
    let state = supervisor
        .actor_state("status-manager", Duration::from_secs(5))
        .await
        .expect("the status manager answers");
    let counter = |name: &str| state["counters"][name].as_u64().expect("a counter");
    (
        counter("patches") + counter("skipped"),
        counter("reconciled"),
        state["batchPasses"].as_u64().expect("batchPasses"),
    )
}

/// Asserts that pod `name`, Running and settled on the node `supervisor` runs, is neither read
/// nor written over two batch passes (10 s each).
pub async fn assert_settled(cluster: &TestCluster, supervisor: &SupervisorHandle, name: &str) {
    // One batch pass first: the watch event of the last PATCH may still have been on its way.
    let (_, _, settled_at) = status_syncs(supervisor).await;
    eventually_async("a batch pass after Running", || async {
        status_syncs(supervisor).await.2 > settled_at
    })
    .await;
    let (syncs, reconciled, passes) = status_syncs(supervisor).await;
    let since = Instant::now();
    eventually_async("two more batch passes", || async {
        status_syncs(supervisor).await.2 >= passes + 2
    })
    .await;
    let (syncs_after, reconciled_after, _) = status_syncs(supervisor).await;
    assert_eq!(
        (syncs_after - syncs, reconciled_after - reconciled),
        (0, 0),
        "a settled pod was synced (a GET, maybe a PATCH) in batch passes"
    );
    if let Some(emulator) = cluster.emulator.as_ref() {
        let requests: Vec<_> = emulator
            .requests()
            .into_iter()
            .filter(|r| r.received >= since && r.resource == "pods" && r.name == name)
            .map(|r| (r.verb, r.subresource))
            .collect();
        assert!(
            requests.is_empty(),
            "requests for a settled pod: {requests:?}"
        );
    }
}
