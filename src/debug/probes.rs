//! `GET /debug/probes`: the prober's workers — pod, container, probe kind, last result,
//! consecutive successes and failures, the result published and the next run — as the
//! prober actor describes them. A node without a prober (simulated runtime) answers 404.

use nodepulse_actors::prober;

use super::{actors::own_state, error::DebugError, reply::Reply, routes::Call};

pub async fn probes(call: Call) -> Result<Reply, DebugError> {
    own_state(call, prober::NAME, "the prober").await
}
