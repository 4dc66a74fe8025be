//! The CRI streaming calls as the kubelet API makes them: each answers with the URL of a
//! one-shot stream on the runtime's streaming server. Failures keep what the kubelet's
//! `streaming.WriteError` needs to pick its status (NotFound 404, ResourceExhausted 429,
//! anything else 500) and its text.

use futures::{FutureExt, future::BoxFuture};

use super::{CallFailure, CriClient, proto::streaming as proto};

/// A streaming call that gave no URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamingError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Exhausted(String),
    #[error("{0}")]
    Failed(String),
}

fn streaming_error(failure: CallFailure, _method: &'static str) -> StreamingError {
    match failure {
        CallFailure::Transport(error) => StreamingError::Failed(error.to_string()),
        CallFailure::Status { code, message } => {
            let text = format!("rpc error: code = {code:?} desc = {message}");
            match code {
                tonic::Code::NotFound => StreamingError::NotFound(text),
                tonic::Code::ResourceExhausted => StreamingError::Exhausted(text),
                _ => StreamingError::Failed(text),
            }
        }
    }
}

impl CriClient {
    pub fn exec_url(
        &self,
        request: proto::ExecRequest,
    ) -> BoxFuture<'static, Result<String, StreamingError>> {
        self.call_as::<_, proto::StreamingUrl, _>("Exec", proto::EXEC, request, streaming_error)
            .map(|answer| answer.map(|url| url.url))
            .boxed()
    }

    pub fn attach_url(
        &self,
        request: proto::AttachRequest,
    ) -> BoxFuture<'static, Result<String, StreamingError>> {
        self.call_as::<_, proto::StreamingUrl, _>("Attach", proto::ATTACH, request, streaming_error)
            .map(|answer| answer.map(|url| url.url))
            .boxed()
    }

    pub fn port_forward_url(
        &self,
        request: proto::PortForwardRequest,
    ) -> BoxFuture<'static, Result<String, StreamingError>> {
        self.call_as::<_, proto::StreamingUrl, _>(
            "PortForward",
            proto::PORT_FORWARD,
            request,
            streaming_error,
        )
        .map(|answer| answer.map(|url| url.url))
        .boxed()
    }
}
