//! The facts the actors tell each other, one type per fact.

use actix::Message;

/// NodeStatusActor → LeaseActor: the Node exists and has this UID, so the Lease can name it
/// as its owner (and be garbage-collected with it).
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct NodeRegistered {
    pub uid: String,
}
