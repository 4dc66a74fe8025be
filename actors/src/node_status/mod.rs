//! NodeStatusActor: registers the Node and keeps its status true.

pub mod setters;
