//! The supervisors the endpoint reports on (one per node) and how a request names an actor:
//! by name, with `?node=` when several nodes run in one process.

use nodepulse_supervisor::{ActorSnapshot, SupervisorHandle};
use serde::Deserialize;

use super::error::DebugError;

#[derive(Clone)]
pub struct Nodes(std::sync::Arc<[SupervisorHandle]>);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeQuery {
    pub node: Option<String>,
}

impl Nodes {
    pub fn new(handles: Vec<SupervisorHandle>) -> Self {
        Self(handles.into())
    }

    pub fn all(&self) -> &[SupervisorHandle] {
        &self.0
    }

    /// Every actor, or those of `node` when given (404 for a node that is not here).
    pub fn actors(&self, node: Option<&str>) -> Result<Vec<ActorSnapshot>, DebugError> {
        match node {
            None => Ok(self.0.iter().flat_map(SupervisorHandle::actors).collect()),
            Some(node) => Ok(self.node(node)?.actors()),
        }
    }

    fn node(&self, node: &str) -> Result<&SupervisorHandle, DebugError> {
        self.0
            .iter()
            .find(|handle| handle.node() == node)
            .ok_or_else(|| {
                DebugError::NotFound(format!("no node named {node:?} runs in this process"))
            })
    }

    /// The supervisor that owns actor `name`.
    pub fn owner_of(
        &self,
        name: &str,
        node: Option<&str>,
    ) -> Result<&SupervisorHandle, DebugError> {
        if let Some(node) = node {
            let handle = self.node(node)?;
            return match handle.actor(name) {
                Some(_) => Ok(handle),
                None => Err(DebugError::NotFound(format!(
                    "no actor named {name:?} on node {node:?}"
                ))),
            };
        }
        let mut owners = self.0.iter().filter(|handle| handle.actor(name).is_some());
        match (owners.next(), owners.next()) {
            (Some(handle), None) => Ok(handle),
            (None, _) => Err(DebugError::NotFound(format!("no actor named {name:?}"))),
            (Some(_), Some(_)) => Err(DebugError::BadRequest(format!(
                "actor name {name:?} is ambiguous: several nodes run here; add ?node=<name>"
            ))),
        }
    }
}
