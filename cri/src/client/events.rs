//! The runtime's container event stream over CRI (`GetContainerEvents`), for the evented
//! PLEG: a server-streaming call opened within `runtimeRequestTimeout`, then open for as long
//! as the runtime keeps it. A runtime without it (containerd 1.6) answers Unimplemented.

use std::{path::Path, time::Duration};

use futures::{FutureExt, StreamExt, future::BoxFuture};
use nodepulse_actors::ports::{
    ContainerEvent, ContainerEvents, ContainerRuntimeError, ContainerRuntimeResult, RuntimeError,
};

use super::{CallFailure, CriClient, proto, proto::paths};
use crate::grpc::UnaryFailure;

const METHOD: &str = "GetContainerEvents";

impl CriClient {
    /// Subscribes to the runtime's container events.
    pub(super) fn events(&self) -> BoxFuture<'static, ContainerRuntimeResult<ContainerEvents>> {
        let grpc = self.grpc.clone();
        let timeout = self.timeout;
        async move {
            let socket = grpc.socket().to_path_buf();
            let stream = grpc
                .server_streaming::<_, proto::ContainerEventResponse>(
                    paths::GET_CONTAINER_EVENTS,
                    proto::GetEventsRequest {},
                    timeout,
                )
                .await
                .map_err(|failure| stream_error(failure, &socket, timeout))?;
            Ok(stream
                .map(move |item| {
                    item.map(event)
                        .map_err(|failure| stream_error(failure, &socket, timeout))
                })
                .boxed())
        }
        .boxed()
    }
}

/// The event's container and the UID of its pod, from the sandbox's metadata.
pub(super) fn event(response: proto::ContainerEventResponse) -> ContainerEvent {
    let pod_uid = response
        .pod_sandbox_status
        .and_then(|sandbox| sandbox.metadata)
        .map(|metadata| metadata.uid)
        .filter(|uid| !uid.is_empty());
    ContainerEvent {
        container_id: response.container_id,
        pod_uid,
    }
}

fn stream_error(failure: UnaryFailure, socket: &Path, timeout: Duration) -> ContainerRuntimeError {
    match failure {
        UnaryFailure::Status {
            code: tonic::Code::Unimplemented,
            ..
        } => ContainerRuntimeError::Unimplemented { method: METHOD },
        UnaryFailure::Status { code, message } => CallFailure::Status { code, message }
            .into_runtime_error(METHOD)
            .into(),
        UnaryFailure::Unreachable(message) => RuntimeError::Unreachable {
            path: socket.to_path_buf(),
            message,
        }
        .into(),
        UnaryFailure::Timeout => RuntimeError::Timeout {
            method: METHOD,
            timeout,
        }
        .into(),
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
pub(super) mod tests;
