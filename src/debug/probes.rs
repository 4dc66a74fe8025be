//! `GET /debug/probes`: the prober's workers — pod, container, probe kind, last result,
//! consecutive successes and failures, the result published and the next run — as the
//! prober actor describes them. A node without a prober (simulated runtime) answers 404.

use actix_web::{HttpResponse, web};
use nodepulse_actors::prober;

use super::{DebugContext, actors::own_state, error::DebugError, nodes::NodeQuery};

pub async fn probes(
    context: web::Data<DebugContext>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    own_state(&context, &query, prober::NAME, "the prober").await
}
