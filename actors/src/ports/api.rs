//! What every API port call can fail with, in the terms the actors decide on.

use std::time::Duration;

/// Why an API call failed, in the terms the actors decide on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 `AlreadyExists`: a create found the name taken.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 409 `Conflict`: a write carried a stale resourceVersion; re-read and retry.
    #[error("conflict: {0}")]
    Conflict(String),
    /// No answer within the request timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// Anything else: transport errors, 5xx, 429, unexpected answers. Retrying may help. A 429
    /// or 5xx that asked for a `Retry-After` gets here only once the API client has waited and
    /// retried it as far as the request's timeout allows (as client-go does).
    #[error("{0}")]
    Other(String),
}

pub type ApiResult<T> = Result<T, ApiError>;
