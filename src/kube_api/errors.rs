//! kube-rs errors in the terms the actors decide on, and the heartbeat timeout around a call.

use std::{future::Future, time::Duration};

use nodepulse_actors::ports::{ApiError, ApiResult};

/// Maps a kube-rs error: 404 → NotFound, 409 AlreadyExists / Conflict, everything else Other
/// with the status code, reason and message.
pub fn from_kube(error: kube::Error) -> ApiError {
    match error {
        kube::Error::Api(status) => match (status.code, status.reason.as_str()) {
            (404, _) => ApiError::NotFound(status.message),
            (409, "AlreadyExists") => ApiError::AlreadyExists(status.message),
            (409, _) => ApiError::Conflict(status.message),
            (code, reason) => ApiError::Other(format!("{code} {reason}: {}", status.message)),
        },
        other => ApiError::Other(other.to_string()),
    }
}

/// Runs `call`, giving up after `timeout` (the request is dropped, and with it the connection's
/// part in it).
pub async fn timed<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> ApiResult<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(from_kube),
        Err(_) => Err(ApiError::Timeout(timeout)),
    }
}
