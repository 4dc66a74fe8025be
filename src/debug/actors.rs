//! `GET /debug/actors`, `GET /debug/actors/{name}` and `POST /debug/actors/{name}/kill`.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use nodepulse_actors::volume_manager;
use nodepulse_supervisor::{ActorRequestError, KillMode};
use serde::Deserialize;
use serde_json::json;

use super::{DebugContext, error::DebugError, nodes::NodeQuery};

/// How long an actor may take to describe its own state before the request gives up.
const STATE_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn list(
    context: web::Data<DebugContext>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    let actors = context.nodes.actors(query.node.as_deref())?;
    Ok(HttpResponse::Ok().json(json!({ "actors": actors })))
}

pub async fn one(
    context: web::Data<DebugContext>,
    name: web::Path<String>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    let handle = context.nodes.owner_of(&name, query.node.as_deref())?;
    let actor = handle
        .actor(&name)
        .ok_or_else(|| DebugError::NotFound(format!("no actor named {name:?}")))?;
    // A stopped or hung actor has no state to show; its figures are still worth serving.
    let state = match handle.actor_state(&name, STATE_TIMEOUT).await {
        Ok(state) => json!({ "available": true, "value": state }),
        Err(error) => json!({ "available": false, "reason": error.to_string() }),
    };
    let mut body =
        serde_json::to_value(actor).map_err(|error| DebugError::Unavailable(error.to_string()))?;
    if let Some(fields) = body.as_object_mut() {
        fields.insert("actorState".to_owned(), state);
    }
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /debug/node`: NodeStatusActor's own view of the Node.
pub async fn node(
    context: web::Data<DebugContext>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    let name = nodepulse_actors::node_status::NAME;
    let handle = context.nodes.owner_of(name, query.node.as_deref())?;
    handle
        .actor_state(name, STATE_TIMEOUT)
        .await
        .map(|mut state| {
            if let (Some(fields), Some(facts)) = (state.as_object_mut(), &context.node_facts) {
                fields.extend(facts());
            }
            HttpResponse::Ok().json(state)
        })
        .map_err(|error| {
            DebugError::Unavailable(format!("the node status actor cannot answer now: {error}"))
        })
}

/// `GET /debug/volumes`: the volume manager's desired and actual state per pod, and why each
/// volume is where it is.
pub async fn volumes(
    context: web::Data<DebugContext>,
    query: web::Query<NodeQuery>,
) -> Result<HttpResponse, DebugError> {
    own_state(&context, &query, volume_manager::NAME, "the volume manager").await
}

/// Actor `name`'s own state as the whole answer (`who` names it in the error).
pub async fn own_state(
    context: &DebugContext,
    query: &NodeQuery,
    name: &str,
    who: &str,
) -> Result<HttpResponse, DebugError> {
    let handle = context.nodes.owner_of(name, query.node.as_deref())?;
    handle
        .actor_state(name, STATE_TIMEOUT)
        .await
        .map(|state| HttpResponse::Ok().json(state))
        .map_err(|error| DebugError::Unavailable(format!("{who} cannot answer now: {error}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillQuery {
    mode: Option<String>,
    node: Option<String>,
}

pub async fn kill(
    request: HttpRequest,
    context: web::Data<DebugContext>,
    name: web::Path<String>,
    query: web::Query<KillQuery>,
) -> Result<HttpResponse, DebugError> {
    // Limited before the token is checked, so a flood of guesses is slowed down too.
    context.kill_rate.check().map_err(|_| {
        DebugError::TooManyRequests(
            "too many kill requests; fault injection is rate limited".to_owned(),
        )
    })?;
    context.gate.check(&request)?;
    let handle = context.nodes.owner_of(&name, query.node.as_deref())?;
    let mode: KillMode = query
        .mode
        .as_deref()
        .ok_or_else(|| {
            DebugError::BadRequest(
                "missing query parameter mode: expected stop, panic or hang".to_owned(),
            )
        })?
        .parse()
        .map_err(DebugError::BadRequest)?;
    tracing::warn!(node = handle.node(), actor = %name, %mode, "fault injection requested through the debug endpoint");
    match handle.kill(&name, mode).await {
        Ok(accepted) => Ok(HttpResponse::Accepted().json(json!({
            "node": handle.node(),
            "actor": accepted.actor,
            "mode": accepted.mode,
            "generation": accepted.generation,
        }))),
        Err(error @ ActorRequestError::UnknownActor(_)) => {
            Err(DebugError::NotFound(error.to_string()))
        }
        Err(error @ ActorRequestError::NotRunning { .. }) => {
            Err(DebugError::Conflict(error.to_string()))
        }
        Err(error @ ActorRequestError::Timeout(_)) => Err(DebugError::Timeout(error.to_string())),
        Err(error @ ActorRequestError::SupervisorGone) => {
            Err(DebugError::Unavailable(error.to_string()))
        }
    }
}
