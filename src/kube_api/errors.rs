//! kube-rs errors in the terms the actors decide on, and the heartbeat timeout around a call.

use std::{future::Future, time::Duration};

use nodepulse_actors::ports::{ApiError, ApiResult};

/// Maps a kube-rs error: 404 → NotFound, 409 AlreadyExists / Conflict, everything else Other
/// with the status code, reason and message, or the error with its causes.
pub fn from_kube(error: kube::Error) -> ApiError {
    match error {
        kube::Error::Api(status) => match (status.code, status.reason.as_str()) {
            (404, _) => ApiError::NotFound(status.message),
            (409, "AlreadyExists") => ApiError::AlreadyExists(status.message),
            (409, _) => ApiError::Conflict(status.message),
            (code, reason) => ApiError::Other(format!("{code} {reason}: {}", status.message)),
        },
        other => ApiError::Other(with_causes(&other)),
    }
}

/// The error and every cause under it (`client error (Connect): invalid peer certificate:
/// UnknownIssuer`): kube-rs's own message stops at the outermost layer, which rarely says what
/// went wrong with a connection.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let message = inner.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        cause = inner.source();
    }
    text
}

/// Runs `call`, giving up after `timeout` (the request is dropped, and with it the connection's
/// part in it). The end of `timeout` is also the deadline a `Retry-After` is weighed against
/// (see `retry_after`): a wait that would outlast it is not started.
pub async fn timed<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> ApiResult<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    let call = super::retry_after::with_deadline(deadline, call);
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(from_kube),
        Err(_) => Err(ApiError::Timeout(timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_connection_error_names_its_causes() {
        let error = Outer(std::io::Error::other(
            "invalid peer certificate: UnknownIssuer",
        ));
        assert_eq!(
            with_causes(&error),
            "client error (Connect): invalid peer certificate: UnknownIssuer"
        );
    }
}
