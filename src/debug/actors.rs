//! `GET /debug/actors`, `GET /debug/actors/{name}` and `POST /debug/actors/{name}/kill`.

use std::time::Duration;

use http::StatusCode;
use nodepulse_supervisor::{ActorRequestError, ChildState, KillMode, SupervisorHandle};
use serde::Deserialize;
use serde_json::json;

use super::{
    error::DebugError,
    nodes::NodeQuery,
    reply::{self, Reply},
    routes::Call,
};

/// How long an actor may take to describe its own state before the request gives up.
const STATE_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn list(call: Call) -> Result<Reply, DebugError> {
    let query: NodeQuery = call.query()?;
    let actors = call.context.nodes.actors(query.node.as_deref())?;
    Ok(reply::json(StatusCode::OK, &json!({ "actors": actors })))
}

pub async fn one(call: Call) -> Result<Reply, DebugError> {
    let query: NodeQuery = call.query()?;
    let name = call.param();
    let handle = call.context.nodes.owner_of(name, query.node.as_deref())?;
    let actor = handle
        .actor(name)
        .ok_or_else(|| DebugError::NotFound(format!("no actor named {name:?}")))?;
    // A stopped or hung actor has no state to show; its figures are still worth serving.
    let state = match handle.actor_state(name, STATE_TIMEOUT).await {
        Ok(state) => json!({ "available": true, "value": state }),
        Err(error) => json!({ "available": false, "reason": error.to_string() }),
    };
    let mut body =
        serde_json::to_value(actor).map_err(|error| DebugError::Unavailable(error.to_string()))?;
    if let Some(fields) = body.as_object_mut() {
        fields.insert("actorState".to_owned(), state);
    }
    Ok(reply::json(StatusCode::OK, &body))
}

/// `GET /debug/node`: NodeStatusActor's own view of the Node.
pub async fn node(call: Call) -> Result<Reply, DebugError> {
    let query: NodeQuery = call.query()?;
    let context = &call.context;
    let name = nodepulse_actors::node_status::NAME;
    let handle = context.nodes.owner_of(name, query.node.as_deref())?;
    handle
        .actor_state(name, STATE_TIMEOUT)
        .await
        .map(|mut state| {
            if let (Some(fields), Some(facts)) = (state.as_object_mut(), &context.node_facts) {
                fields.extend(facts());
            }
            reply::json(StatusCode::OK, &state)
        })
        .map_err(|error| {
            DebugError::Unavailable(format!("the node status actor cannot answer now: {error}"))
        })
}

/// `GET /debug/volumes`: the volume manager's desired and actual state per pod, and why each
/// volume is where it is.
pub async fn volumes(call: Call) -> Result<Reply, DebugError> {
    own_state(
        call,
        nodepulse_actors::volume_manager::NAME,
        "the volume manager",
    )
    .await
}

/// Actor `name`'s own state as the whole answer (`who` names it in the error).
pub async fn own_state(call: Call, name: &str, who: &str) -> Result<Reply, DebugError> {
    let query: NodeQuery = call.query()?;
    let handle = call.context.nodes.owner_of(name, query.node.as_deref())?;
    handle
        .actor_state(name, STATE_TIMEOUT)
        .await
        .map(|state| reply::json(StatusCode::OK, &state))
        .map_err(|error| DebugError::Unavailable(format!("{who} cannot answer now: {error}")))
}

/// How often a kill of a starting actor looks again whether it runs.
const STARTING_POLL: Duration = Duration::from_millis(5);

/// A kill that arrives while its actor is still starting (the daemon just came up, or the
/// actor is being restarted) waits for it to run, at most [`STATE_TIMEOUT`]: the endpoint
/// answers as soon as the daemon is up, and the caller could not have known better. After
/// that the supervisor's answer stands (409 when it still does not run).
async fn wait_while_starting(handle: &SupervisorHandle, name: &str) {
    let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
    while handle
        .actor(name)
        .is_some_and(|actor| actor.state == ChildState::Starting)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(STARTING_POLL).await;
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillQuery {
    mode: Option<String>,
    node: Option<String>,
}

pub async fn kill(call: Call) -> Result<Reply, DebugError> {
    let context = &call.context;
    let name = call.param();
    // A malformed query is refused first, as before any other check.
    let query: KillQuery = call.query()?;
    // Limited before the token is checked, so a flood of guesses is slowed down too.
    context.kill_rate.check().map_err(|_| {
        DebugError::TooManyRequests(
            "too many kill requests; fault injection is rate limited".to_owned(),
        )
    })?;
    context.gate.check(&call.headers)?;
    let handle = context.nodes.owner_of(name, query.node.as_deref())?;
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
    wait_while_starting(handle, name).await;
    match handle.kill(name, mode).await {
        Ok(accepted) => Ok(reply::json(
            StatusCode::ACCEPTED,
            &json!({
            "node": handle.node(),
            "actor": accepted.actor,
            "mode": accepted.mode,
            "generation": accepted.generation,
            }),
        )),
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
