//! The CRI container event stream (`GetContainerEvents`, CRI v1 since Kubernetes 1.26;
//! containerd serves it from 1.7): what the evented PLEG subscribes to. The container statuses
//! an event also carries (field 5) are left unread: an event only asks for a fresh read.

use super::PodSandboxStatus;

/// `GetEventsRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetEventsRequest {}

/// `ContainerEventType`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ContainerEventType {
    ContainerCreatedEvent = 0,
    ContainerStartedEvent = 1,
    ContainerStoppedEvent = 2,
    ContainerDeletedEvent = 3,
}

/// `ContainerEventResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerEventResponse {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(enumeration = "ContainerEventType", tag = "2")]
    pub container_event_type: i32,
    #[prost(int64, tag = "3")]
    pub created_at: i64,
    #[prost(message, optional, tag = "4")]
    pub pod_sandbox_status: Option<PodSandboxStatus>,
}
