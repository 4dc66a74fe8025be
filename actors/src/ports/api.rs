//! What every API port call can fail with, in the terms the actors decide on. Each variant
//! says whether trying again can help ([`ApiError::is_retryable`]), as kube's `watcher::Error`
//! documents per variant; the adapter keeps the underlying error as the `source`.

use std::{sync::Arc, time::Duration};

/// The error an adapter failed with (kube's, serde's), shared so `ApiError` stays `Clone`.
pub type ErrorSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why an API call failed, in the terms the actors decide on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404: the object does not exist. Retrying the same call does not help; creating it may.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 `AlreadyExists`: a create found the name taken. Read (adopt) it instead of retrying.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 409 `Conflict`: a write carried a stale resourceVersion. Retrying helps after a re-read.
    #[error("conflict: {0}")]
    Conflict(String),
    /// No answer within the request timeout. Retrying helps (the server or the path may be
    /// back); the heartbeat paths also reset their connections.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The API server answered with another error status. 429 and 5xx are transient (they get
    /// here only once the API client has waited out a `Retry-After` as far as the request's
    /// timeout allows, as client-go does); other 4xx (403, 422 Invalid) are not.
    #[error("{code} {reason}: {message}")]
    Refused {
        code: u16,
        reason: String,
        message: String,
    },
    /// No answer: connecting, TLS or the HTTP exchange failed. `message` names every cause
    /// (the outermost layer alone rarely says what went wrong). Retrying helps.
    #[error("{message}")]
    Transport {
        message: String,
        #[source]
        source: ErrorSource,
    },
    /// The answer is not the object asked for. The same request gets the same answer: retrying
    /// does not help.
    #[error("unexpected answer: {0}")]
    Decode(#[source] ErrorSource),
    /// The object lacks a field nodepulse needs (a Node without a UID). Retrying does not help
    /// until someone changes the object.
    #[error("incomplete object: {0}")]
    Incomplete(String),
}

impl ApiError {
    /// Whether the same call, made again (after a re-read for a conflict), can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Conflict(_) | Self::Timeout(_) | Self::Transport { .. } => true,
            Self::Refused { code, .. } => *code == 429 || *code >= 500,
            Self::NotFound(_) | Self::AlreadyExists(_) | Self::Decode(_) | Self::Incomplete(_) => {
                false
            }
        }
    }

    /// An answer that did not decode as the object asked for.
    pub fn decode(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Decode(Arc::new(error))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The failures test fakes answer with.
#[cfg(test)]
impl ApiError {
    /// A 503 from the API server.
    pub(crate) fn unavailable() -> Self {
        Self::Refused {
            code: 503,
            reason: "ServiceUnavailable".to_owned(),
            message: "the server is currently unable to handle the request".to_owned(),
        }
    }

    /// No API server listening.
    pub(crate) fn connection_refused() -> Self {
        Self::Transport {
            message: "connection refused".to_owned(),
            source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn refused(code: u16) -> ApiError {
        ApiError::Refused {
            code,
            reason: "Reason".to_owned(),
            message: "message".to_owned(),
        }
    }

    #[test]
    fn transient_answers_are_retryable_and_verdicts_are_not() {
        assert!(refused(429).is_retryable());
        assert!(refused(503).is_retryable());
        assert!(!refused(422).is_retryable());
        assert!(!refused(403).is_retryable());
        assert!(ApiError::Conflict("stale".to_owned()).is_retryable());
        assert!(ApiError::Timeout(Duration::from_secs(10)).is_retryable());
        assert!(!ApiError::NotFound("node".to_owned()).is_retryable());
        assert!(!ApiError::AlreadyExists("node".to_owned()).is_retryable());
        assert!(!ApiError::Incomplete("no uid".to_owned()).is_retryable());
    }

    #[test]
    fn a_decode_error_keeps_its_source() {
        let cause = serde_json::from_str::<u32>("\"x\"").expect_err("not a number");
        let error = ApiError::decode(cause);
        assert!(!error.is_retryable());
        assert!(
            error
                .to_string()
                .starts_with("unexpected answer: invalid type")
        );
        assert!(error.source().is_some(), "the serde error is the source");
    }
}
