//! `GET /debug/probes`: the prober's workers — pod, container, probe kind, last result,
//! consecutive successes and failures, the result published and the next run — as the
//! prober actor describes them. A node without a prober (simulated runtime) answers 404.

use actix_web::{HttpResponse, web};

use super::{DebugContext, actors::STATE_TIMEOUT, error::DebugError, nodes::NodeQuery};

pub async fn probes(
    context: web::Data<DebugContext>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    let name = nodepulse_actors::prober::NAME;
    let handle = context.nodes.owner_of(name, query.node.as_deref())?;
    handle
        .actor_state(name, STATE_TIMEOUT)
        .await
        .map(|state| HttpResponse::Ok().json(state))
        .map_err(|error| DebugError::Unavailable(format!("the prober cannot answer now: {error}")))
}
