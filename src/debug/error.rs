//! Every error the debug endpoint returns: a status code and a JSON body that says what was
//! wrong, in the same shape on every route.

use http::{HeaderValue, StatusCode, header};
use serde_json::json;

use super::reply::{self, Reply};

#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    TooManyRequests(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Unavailable(String),
}

impl DebugError {
    fn reason(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "BadRequest",
            Self::Unauthorized(_) => "Unauthorized",
            Self::Forbidden(_) => "Forbidden",
            Self::NotFound(_) => "NotFound",
            Self::MethodNotAllowed(_) => "MethodNotAllowed",
            Self::Conflict(_) => "Conflict",
            Self::TooManyRequests(_) => "TooManyRequests",
            Self::Timeout(_) => "Timeout",
            Self::Unavailable(_) => "ServiceUnavailable",
        }
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON answer, with `WWW-Authenticate: Bearer` on a 401 as RFC 6750 asks.
    pub fn into_reply(self) -> Reply {
        let status = self.status_code();
        let mut reply = reply::json(
            status,
            &json!({
                "error": {
                    "code": status.as_u16(),
                    "reason": self.reason(),
                    "message": self.to_string(),
                }
            }),
        );
        if matches!(self, Self::Unauthorized(_)) {
            reply
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        reply
    }
}
